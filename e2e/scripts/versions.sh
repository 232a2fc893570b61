# Versions both providers run, sourced by build-binaries.sh (the local provider) and
# build-kind-images.sh (kind's node image): one Kubernetes build and one etcd for both.
# The environment overrides each.
KUBE_VERSION="${KUBE_VERSION:-v1.37.2}"
ETCD_VERSION="${ETCD_VERSION:-v3.7.0}" # kubeadm v1.37's default etcd is 3.7.0-0
