// Package s3store runs a real S3 store inside a test cluster: Versity S3 Gateway (versitygw,
// built from the Go module proxy by e2e/scripts/build-s3store.sh) as a Deployment and a
// Service polyaxon-s3 on port 7070, its root account's keys random in a Secret, its objects
// files on an emptyDir, under the restricted Pod Security level. Connect reaches it from this
// machine as an s3test.Store, whose admin calls create accounts (role user) and the buckets
// they own.
//
// On the local provider the pod is a host program (Program): versitygw runs on this machine
// with the container's flags, its ports on loopback and its directories the pod's volumes. On
// kind it is the image polyaxon-deploy/s3store:v1.8.0 of build-kind-images.sh (the static
// binary alone, run as nobody).
package s3store
