package local

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"

	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster"
)

// serviceAccountMountPath is where the kubelet mounts a pod's API token; a container that
// has it gets a kubeconfig instead (HostRewrites).
const serviceAccountMountPath = "/var/run/secrets/kubernetes.io/serviceaccount"

// prepareMounts writes the container's volumes under dir/volumes, as the kubelet would
// populate them, and returns where each mount path is here. A container that mounts the
// ServiceAccount token also gets dir/kubeconfig (its path is returned) carrying that token.
func prepareMounts(ctx context.Context, c *cluster.Cluster, p *corev1.Pod, ctr *corev1.Container, dir string) (map[string]string, string, error) {
	volumes := map[string]corev1.Volume{}
	for _, v := range p.Spec.Volumes {
		volumes[v.Name] = v
	}
	mounts := map[string]string{}
	kubeconfig := ""
	for _, m := range ctr.VolumeMounts {
		v, ok := volumes[m.Name]
		if !ok {
			return nil, "", fmt.Errorf("container %s mounts volume %s, which the pod does not have", ctr.Name, m.Name)
		}
		volDir, err := populateVolume(ctx, c, p, v, filepath.Join(dir, "volumes", v.Name))
		if err != nil {
			return nil, "", fmt.Errorf("volume %s: %w", v.Name, err)
		}
		mounts[m.MountPath] = filepath.Join(volDir, m.SubPath)
		if m.MountPath == serviceAccountMountPath {
			kubeconfig = filepath.Join(dir, "kubeconfig")
			if err := writeKubeconfig(c, p, filepath.Join(volDir, "token"), kubeconfig); err != nil {
				return nil, "", err
			}
		}
	}
	return mounts, kubeconfig, nil
}

// populateVolume fills volDir with the volume's files and returns the directory that backs it
// (a claim's is its bound volume's own directory, shared with every pod that mounts it).
func populateVolume(ctx context.Context, c *cluster.Cluster, p *corev1.Pod, v corev1.Volume, volDir string) (string, error) {
	r := apiReader{c.Clientset}
	switch {
	case v.PersistentVolumeClaim != nil:
		pvc, err := c.Clientset.CoreV1().PersistentVolumeClaims(p.Namespace).Get(ctx, v.PersistentVolumeClaim.ClaimName, metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		if pvc.Spec.VolumeName == "" {
			return "", fmt.Errorf("claim %s is not bound", pvc.Name)
		}
		pv, err := c.Clientset.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		switch {
		case pv.Spec.HostPath != nil:
			return pv.Spec.HostPath.Path, os.MkdirAll(pv.Spec.HostPath.Path, 0o777)
		case pv.Spec.Local != nil:
			return pv.Spec.Local.Path, os.MkdirAll(pv.Spec.Local.Path, 0o777)
		}
		return "", fmt.Errorf("volume %s of claim %s has no directory on this machine", pv.Name, pvc.Name)
	case v.HostPath != nil:
		return v.HostPath.Path, nil
	}
	if err := os.MkdirAll(volDir, 0o755); err != nil {
		return "", err
	}
	switch {
	case v.EmptyDir != nil:
	case v.ConfigMap != nil:
		data, err := r.configMap(ctx, p.Namespace, v.ConfigMap.Name)
		if err != nil && !optional(v.ConfigMap.Optional) {
			return "", err
		}
		if err := writeItems(volDir, stringBytes(data), v.ConfigMap.Items); err != nil {
			return "", err
		}
	case v.Secret != nil:
		data, err := r.secret(ctx, p.Namespace, v.Secret.SecretName)
		if err != nil && !optional(v.Secret.Optional) {
			return "", err
		}
		if err := writeItems(volDir, data, v.Secret.Items); err != nil {
			return "", err
		}
	case v.Projected != nil:
		for _, src := range v.Projected.Sources {
			if err := populateProjection(ctx, c, p, src, volDir); err != nil {
				return "", err
			}
		}
	default:
		return "", fmt.Errorf("kind of volume not supported on this machine")
	}
	return volDir, nil
}

// populateProjection writes one source of a projected volume: the kube-api-access volume the
// API server adds for the token is one (token, ca.crt, namespace).
func populateProjection(ctx context.Context, c *cluster.Cluster, p *corev1.Pod, src corev1.VolumeProjection, volDir string) error {
	r := apiReader{c.Clientset}
	switch {
	case src.ServiceAccountToken != nil:
		tr := &authv1.TokenRequest{Spec: authv1.TokenRequestSpec{
			ExpirationSeconds: src.ServiceAccountToken.ExpirationSeconds,
			BoundObjectRef:    &authv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: p.Name, UID: p.UID},
		}}
		if a := src.ServiceAccountToken.Audience; a != "" {
			tr.Spec.Audiences = []string{a}
		}
		sa := p.Spec.ServiceAccountName
		if sa == "" {
			sa = "default"
		}
		tok, err := c.Clientset.CoreV1().ServiceAccounts(p.Namespace).CreateToken(ctx, sa, tr, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("token of ServiceAccount %s: %w", sa, err)
		}
		return os.WriteFile(filepath.Join(volDir, src.ServiceAccountToken.Path), []byte(tok.Status.Token), 0o600)
	case src.ConfigMap != nil:
		data, err := r.configMap(ctx, p.Namespace, src.ConfigMap.Name)
		if err != nil && !optional(src.ConfigMap.Optional) {
			return err
		}
		return writeItems(volDir, stringBytes(data), src.ConfigMap.Items)
	case src.Secret != nil:
		data, err := r.secret(ctx, p.Namespace, src.Secret.Name)
		if err != nil && !optional(src.Secret.Optional) {
			return err
		}
		return writeItems(volDir, data, src.Secret.Items)
	case src.DownwardAPI != nil:
		for _, item := range src.DownwardAPI.Items {
			if item.FieldRef == nil {
				continue
			}
			v, err := podField(p, item.FieldRef.FieldPath)
			if err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(volDir, item.Path), []byte(v), 0o644); err != nil {
				return err
			}
		}
	}
	return nil
}

// writeItems writes a ConfigMap's or Secret's keys as files: the listed items, or every key.
func writeItems(dir string, data map[string][]byte, items []corev1.KeyToPath) error {
	if len(items) == 0 {
		for k := range data {
			items = append(items, corev1.KeyToPath{Key: k, Path: k})
		}
	}
	for _, it := range items {
		b, ok := data[it.Key]
		if !ok {
			continue
		}
		path := filepath.Join(dir, it.Path)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, b, 0o600); err != nil {
			return err
		}
	}
	return nil
}

func stringBytes(m map[string]string) map[string][]byte {
	out := make(map[string][]byte, len(m))
	for k, v := range m {
		out[k] = []byte(v)
	}
	return out
}

// writeKubeconfig writes a kubeconfig for the API server with the token of tokenFile, inline
// (every client reads that) and as the file (client-go rereads it).
func writeKubeconfig(c *cluster.Cluster, p *corev1.Pod, tokenFile, path string) error {
	token, err := os.ReadFile(tokenFile)
	if err != nil {
		return fmt.Errorf("kubeconfig: the pod's ServiceAccount token: %w", err)
	}
	ca := c.RESTConfig.TLSClientConfig.CAData
	if len(ca) == 0 && c.RESTConfig.TLSClientConfig.CAFile != "" {
		b, err := os.ReadFile(c.RESTConfig.TLSClientConfig.CAFile)
		if err != nil {
			return err
		}
		ca = b
	}
	name := strings.ReplaceAll(p.Namespace+"-"+p.Name, ".", "-")
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["cluster"] = &clientcmdapi.Cluster{Server: c.RESTConfig.Host, CertificateAuthorityData: ca}
	cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: string(token), TokenFile: tokenFile}
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: "cluster", AuthInfo: name, Namespace: p.Namespace}
	cfg.CurrentContext = name
	return clientcmd.WriteToFile(*cfg, path)
}

// FreeLoopbackPort is a port free on 127.0.0.1 at the time of the call.
func FreeLoopbackPort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
