package s3store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster"
	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/s3test"
)

const (
	// ImageRepository is the store's image: the local provider runs Program for it, kind the
	// image of build-kind-images.sh (build_s3store_image).
	ImageRepository = "polyaxon-deploy/s3store"
	// Version is versitygw's, as build-s3store.sh pins it (VERSITYGW_VERSION).
	Version = "v1.8.0"
	// Image is the image a Deploy runs unless Options say otherwise.
	Image = ImageRepository + ":" + Version
	// Name is the default name of the Deployment and its Service (the Service's DNS name is
	// what runs reach: http://polyaxon-s3.<namespace>:7070).
	Name = "polyaxon-s3"
	// Port is the S3 API's port, of the container and of the Service.
	Port = 7070
	// AdminPort is versitygw's admin API (accounts, bucket owners), on a Service of its own
	// (<name>-admin), so that what reaches the S3 Service reaches no admin port.
	AdminPort = 7071
)

// The container's directories: each an emptyDir (versitygw creates none of them, and the root
// filesystem is read-only).
const (
	dataPath = "/data" // the POSIX backend's root: bucket B's object KEY is the file /data/B/KEY
	metaPath = "/meta" // the sidecar metadata (owners, ACLs, ETags)
	iamPath  = "/iam"  // the internal IAM's users.json
)

// Options place the store.
type Options struct {
	Namespace string
	// Name of the Deployment, the Service and the root keys' Secret (<name>-root); default Name.
	Name string
	// Image; default Image.
	Image string
	// NodeSelector of the store's pod (kind: a node that has the image).
	NodeSelector map[string]string
}

// Store is a store Deploy started in a cluster.
type Store struct {
	Namespace, Name string
	// Endpoint is the S3 API's URL inside the cluster: http://<name>.<namespace>:7070.
	Endpoint string
	// The root account: an admin, the only one that may call the admin API.
	RootAccessKey, RootSecretKey string

	c *cluster.Cluster
}

// AdminService is the Service of the admin API.
func (s *Store) AdminService() string { return s.Name + "-admin" }

// RootSecret is the Secret of the root account's keys (ROOT_ACCESS_KEY_ID,
// ROOT_SECRET_ACCESS_KEY), the container's envFrom.
func (s *Store) RootSecret() string { return s.Name + "-root" }

func labels(name string) map[string]string {
	return map[string]string{"app.kubernetes.io/name": name, "app.kubernetes.io/component": "s3store"}
}

// Deploy starts versitygw in opts.Namespace (which must exist) and returns once its pod is
// Ready (GET /health answers). The namespace may enforce the restricted Pod Security level.
func Deploy(ctx context.Context, c *cluster.Cluster, opts Options) (*Store, error) {
	if opts.Name == "" {
		opts.Name = Name
	}
	if opts.Image == "" {
		opts.Image = Image
	}
	s := &Store{
		Namespace:     opts.Namespace,
		Name:          opts.Name,
		Endpoint:      fmt.Sprintf("http://%s.%s:%d", opts.Name, opts.Namespace, Port),
		RootAccessKey: "ROOT" + strings.ToUpper(randomHex(8)), // 20 characters, as AWS's
		RootSecretKey: randomHex(20),                          // 40 characters
		c:             c,
	}
	cs := c.Clientset
	if _, err := cs.CoreV1().Secrets(s.Namespace).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: s.RootSecret(), Labels: labels(s.Name)},
		StringData: map[string]string{"ROOT_ACCESS_KEY_ID": s.RootAccessKey, "ROOT_SECRET_ACCESS_KEY": s.RootSecretKey},
	}, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("the store's root Secret: %w", err)
	}
	for name, port := range map[string]struct {
		number int32
		name   string
	}{s.Name: {Port, "s3"}, s.AdminService(): {AdminPort, "admin"}} {
		if _, err := cs.CoreV1().Services(s.Namespace).Create(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels(s.Name)},
			Spec: corev1.ServiceSpec{Selector: labels(s.Name), Ports: []corev1.ServicePort{{
				Name: port.name, Port: port.number, TargetPort: intstr.FromString(port.name),
			}}},
		}, metav1.CreateOptions{}); err != nil {
			return nil, fmt.Errorf("Service %s: %w", name, err)
		}
	}
	if _, err := cs.AppsV1().Deployments(s.Namespace).Create(ctx, deployment(s, opts), metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("Deployment %s: %w", s.Name, err)
	}
	if err := s.waitReady(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// Existing is the store an earlier Deploy of opts started (`make demo` run again finds the
// demo's), its root keys read back from its Secret, once its pod is Ready; (nil, nil) when
// opts.Namespace has no such Deployment.
func Existing(ctx context.Context, c *cluster.Cluster, opts Options) (*Store, error) {
	if opts.Name == "" {
		opts.Name = Name
	}
	s := &Store{Namespace: opts.Namespace, Name: opts.Name, Endpoint: fmt.Sprintf("http://%s.%s:%d", opts.Name, opts.Namespace, Port), c: c}
	if _, err := c.Clientset.AppsV1().Deployments(s.Namespace).Get(ctx, s.Name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	sec, err := c.Clientset.CoreV1().Secrets(s.Namespace).Get(ctx, s.RootSecret(), metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("the store's root Secret: %w", err)
	}
	s.RootAccessKey, s.RootSecretKey = string(sec.Data["ROOT_ACCESS_KEY_ID"]), string(sec.Data["ROOT_SECRET_ACCESS_KEY"])
	if s.RootAccessKey == "" || s.RootSecretKey == "" {
		return nil, fmt.Errorf("Secret %s/%s has no ROOT_ACCESS_KEY_ID or ROOT_SECRET_ACCESS_KEY", s.Namespace, s.RootSecret())
	}
	if err := s.waitReady(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// waitReady returns once the store's Deployment has a Ready replica, or at once when
// versitygw exited in its pod.
func (s *Store) waitReady(ctx context.Context) error {
	cs := s.c.Clientset
	last := "not created"
	err := wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		d, err := cs.AppsV1().Deployments(s.Namespace).Get(ctx, s.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		last = fmt.Sprintf("%d of 1 replica ready", d.Status.ReadyReplicas)
		if d.Status.ReadyReplicas >= 1 {
			return true, nil
		}
		return false, s.exited(ctx)
	})
	if err != nil {
		return fmt.Errorf("Deployment %s/%s: %s: %w", s.Namespace, s.Name, last, err)
	}
	return nil
}

// exited is an error when versitygw exited in the store's pod (its flags refused, a directory
// missing): waiting on would not make it Ready.
func (s *Store) exited(ctx context.Context) error {
	pods, err := s.c.Clientset.CoreV1().Pods(s.Namespace).List(ctx, metav1.ListOptions{LabelSelector: selector(s.Name)})
	if err != nil {
		return err
	}
	for _, p := range pods.Items {
		for _, cs := range p.Status.ContainerStatuses {
			for _, st := range []*corev1.ContainerStateTerminated{cs.State.Terminated, cs.LastTerminationState.Terminated} {
				if st != nil {
					return fmt.Errorf("versitygw exited %d in pod %s: %s", st.ExitCode, p.Name, st.Message)
				}
			}
		}
	}
	return nil
}

func selector(name string) string {
	return "app.kubernetes.io/name=" + name + ",app.kubernetes.io/component=s3store"
}

// deployment is versitygw's Deployment: one replica, its data on emptyDirs, the restricted
// Pod Security level's settings (non-root 65534, no privilege escalation, no capabilities,
// the runtime's seccomp profile) and a read-only root filesystem.
func deployment(s *Store, opts Options) *appsv1.Deployment {
	replicas := int32(1)
	no, yes := false, true
	nobody := int64(65534)
	var volumes []corev1.Volume
	var mounts []corev1.VolumeMount
	for _, v := range []struct{ name, path string }{{"data", dataPath}, {"meta", metaPath}, {"iam", iamPath}} {
		volumes = append(volumes, corev1.Volume{Name: v.name, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
		mounts = append(mounts, corev1.VolumeMount{Name: v.name, MountPath: v.path})
	}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: s.Name, Labels: labels(s.Name)},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels(s.Name)},
			// Its data are on emptyDirs: a second pod would be a second, empty store.
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels(s.Name)},
				Spec: corev1.PodSpec{
					NodeSelector:                 opts.NodeSelector,
					AutomountServiceAccountToken: &no,
					SecurityContext: &corev1.PodSecurityContext{
						RunAsNonRoot: &yes, RunAsUser: &nobody, RunAsGroup: &nobody, FSGroup: &nobody,
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
					},
					Containers: []corev1.Container{{
						Name:            "versitygw",
						Image:           opts.Image,
						ImagePullPolicy: corev1.PullNever, // built here (kind) or not an image at all (local)
						// Why it exited, in its status (Deploy's error): the end of its log.
						TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
						// Global flags, then the backend and its root; the root keys come from the
						// Secret (ROOT_ACCESS_KEY_ID, ROOT_SECRET_ACCESS_KEY), never the command line.
						Args: []string{
							"--port", fmt.Sprintf(":%d", Port), "--admin-port", fmt.Sprintf(":%d", AdminPort),
							"--region", s3test.Region, "--health", "/health", "--iam-dir", iamPath,
							"posix", "--sidecar", metaPath, dataPath,
						},
						EnvFrom: []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{
							LocalObjectReference: corev1.LocalObjectReference{Name: s.RootSecret()}}}},
						Ports: []corev1.ContainerPort{{Name: "s3", ContainerPort: Port}, {Name: "admin", ContainerPort: AdminPort}},
						ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
							Path: "/health", Port: intstr.FromString("s3")}}, PeriodSeconds: 2},
						SecurityContext: &corev1.SecurityContext{
							AllowPrivilegeEscalation: &no, ReadOnlyRootFilesystem: &yes, RunAsNonRoot: &yes,
							Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
						},
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
							corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("64Mi")}},
						VolumeMounts: mounts,
					}},
					Volumes: volumes,
				},
			},
		},
	}
}

// Forward is a way from this machine to a Service port of the cluster: it returns host:port.
type Forward func(ctx context.Context, namespace, service string, port int32) (string, error)

// Connect is the store as this machine reaches it (fwd: local.ServiceAddress on the local
// provider, a port-forward on kind): the S3 API and the admin API signed by the root account.
func (s *Store) Connect(ctx context.Context, fwd Forward) (*s3test.Store, error) {
	api, err := fwd(ctx, s.Namespace, s.Name, Port)
	if err != nil {
		return nil, fmt.Errorf("reaching Service %s/%s:%d: %w", s.Namespace, s.Name, Port, err)
	}
	admin, err := fwd(ctx, s.Namespace, s.AdminService(), AdminPort)
	if err != nil {
		return nil, fmt.Errorf("reaching Service %s/%s:%d: %w", s.Namespace, s.AdminService(), AdminPort, err)
	}
	return s3test.Attach("http://"+api, "http://"+admin, s.RootAccessKey, s.RootSecretKey), nil
}

// Pod is the store's running pod.
func (s *Store) Pod(ctx context.Context) (*corev1.Pod, error) {
	pods, err := s.c.Clientset.CoreV1().Pods(s.Namespace).List(ctx, metav1.ListOptions{LabelSelector: selector(s.Name)})
	if err != nil {
		return nil, err
	}
	for i := range pods.Items {
		if p := &pods.Items[i]; p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			return p, nil
		}
	}
	return nil, fmt.Errorf("no running pod of the store %s/%s", s.Namespace, s.Name)
}

// EnsureBuild builds versitygw from the Go module proxy (e2e/scripts/build-s3store.sh,
// cached) and returns the binary's path.
func EnsureBuild(ctx context.Context, progress io.Writer) (string, error) {
	p, err := cluster.RunBuildScript(ctx, "build-s3store.sh", 1, progress)
	if err != nil {
		return "", err
	}
	return p[0], nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
