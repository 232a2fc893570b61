package kind

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	kindcluster "sigs.k8s.io/kind/pkg/cluster"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster"
)

// OfflineEnv runs TestKindOffline when set to 1. The test needs the private engine and
// the images of e2e/scripts/build-kind-images.sh; it is not part of `make test` yet.
const OfflineEnv = "POLYAXON_DEPLOY_KIND_OFFLINE"

// TestKindOffline: through the kind library, a cluster of one control plane and two workers
// from the node image built here, on the private engine; every node Ready, CoreDNS running,
// and a pod of an image built on this machine (loaded into the nodes, never pulled) running.
func TestKindOffline(t *testing.T) {
	if os.Getenv(OfflineEnv) != "1" {
		t.Skipf("set %s=1 (after e2e/scripts/build-kind-images.sh) to run", OfflineEnv)
	}
	t.Setenv("DOCKER_HOST", OfflineDockerHost)
	ctx := context.Background()
	require.NoError(t, DockerAvailable(ctx))
	kubeVersion := os.Getenv("KUBE_VERSION")
	if kubeVersion == "" {
		kubeVersion = "v1.37.2"
	}
	image := OfflineNodeImage(kubeVersion)
	require.NoError(t, exec.Command("docker", "image", "inspect", image).Run(), "node image %s: run e2e/scripts/build-kind-images.sh", image)

	p := kindcluster.NewProvider(kindcluster.ProviderWithDocker())
	name := "pxkind"
	kc := t.TempDir() + "/kubeconfig"
	_ = p.Delete(name, kc)
	start := time.Now()
	err := p.Create(name,
		kindcluster.CreateWithV1Alpha4Config(OfflineConfig(2)),
		kindcluster.CreateWithNodeImage(image),
		kindcluster.CreateWithKubeconfigPath(kc),
		kindcluster.CreateWithWaitForReady(8*time.Minute),
		kindcluster.CreateWithRetain(os.Getenv("KIND_RETAIN") == "1"),
		kindcluster.CreateWithDisplayUsage(false),
		kindcluster.CreateWithDisplaySalutation(false),
	)
	require.NoError(t, err)
	t.Logf("kind create: %s", time.Since(start).Round(time.Second))
	if os.Getenv("KIND_RETAIN") != "1" {
		t.Cleanup(func() { _ = p.Delete(name, kc) })
	}
	c, err := cluster.FromKubeconfig(name, "kind", kc)
	require.NoError(t, err)
	cs := c.Clientset

	ctx, cancel := context.WithTimeout(ctx, 8*time.Minute)
	defer cancel()
	require.NoError(t, cluster.WaitNodesReady(ctx, cs, nil))
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, nodes.Items, 3)

	running := func(ns, selector string, want int) func(context.Context) (bool, error) {
		return func(ctx context.Context) (bool, error) {
			pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
			if err != nil {
				return false, nil
			}
			n := 0
			for _, p := range pods.Items {
				if p.Status.Phase == corev1.PodRunning {
					n++
				}
			}
			return n >= want, nil
		}
	}
	require.NoError(t, wait.PollUntilContextCancel(ctx, time.Second, true, running("kube-system", "k8s-app=kube-dns", 2)), "CoreDNS running")

	// An image built here: a Debian root from the build's cache, loaded into every node.
	local := "polyaxon-deploy/kind-smoke:1"
	if exec.Command("docker", "image", "inspect", local).Run() != nil {
		out, err := exec.Command("sh", "-c", "docker tag docker.io/polyaxon-deploy/local-path-helper:bookworm "+local).CombinedOutput()
		require.NoError(t, err, string(out))
	}
	require.NoError(t, LoadDockerImage(ctx, p, name, local))
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "smoke", Namespace: "default", Labels: map[string]string{"app": "smoke"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "smoke", Image: local, ImagePullPolicy: corev1.PullNever,
			Command: []string{"sh", "-c", "echo hello from $(hostname); sleep 3600"},
		}}},
	}
	_, err = cs.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{})
	require.NoError(t, err)
	require.NoError(t, wait.PollUntilContextCancel(ctx, time.Second, true, running("default", "app=smoke", 1)), "smoke pod running")
	logs, err := cs.CoreV1().Pods("default").GetLogs("smoke", &corev1.PodLogOptions{}).DoRaw(ctx)
	require.NoError(t, err)
	require.True(t, strings.Contains(string(logs), "hello from smoke"), string(logs))
	t.Logf("smoke pod log: %s", strings.TrimSpace(string(logs)))

	// The default StorageClass (local-path-provisioner, built here) binds a claim, and a pod
	// writes to it.
	claim := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: "default"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	_, err = cs.CoreV1().PersistentVolumeClaims("default").Create(ctx, claim, metav1.CreateOptions{})
	require.NoError(t, err)
	writer := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "writer", Namespace: "default", Labels: map[string]string{"app": "writer"}},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{
				Name: "w", Image: local, ImagePullPolicy: corev1.PullNever,
				Command:      []string{"sh", "-c", "echo persisted >/data/f && cat /data/f"},
				VolumeMounts: []corev1.VolumeMount{{Name: "d", MountPath: "/data"}},
			}},
			Volumes: []corev1.Volume{{Name: "d", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}},
		},
	}
	_, err = cs.CoreV1().Pods("default").Create(ctx, writer, metav1.CreateOptions{})
	require.NoError(t, err)
	require.NoError(t, wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods("default").Get(ctx, "writer", metav1.GetOptions{})
		return err == nil && p.Status.Phase == corev1.PodSucceeded, nil
	}), "writer pod on a provisioned volume succeeded")
}
