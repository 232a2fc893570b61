package cloudnativepg

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	k8syaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster"
	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster/kind"
)

// CloudNativePG as its release manifest (releases/cnpg-<Version>.yaml of the module) installs it.
const (
	// Version is the operator's, as build-cloudnativepg.sh pins it (CLOUDNATIVEPG_VERSION).
	Version = "1.28.0"
	// Namespace is the operator's namespace in the release manifest.
	Namespace = "cnpg-system"
	// DeploymentName is the operator's Deployment (one replica, leader-elected).
	DeploymentName = "cnpg-controller-manager"
	// OperatorImage is the operator's image: the release manifest's name, which
	// build-kind-images.sh cloudnativepg gives the local build.
	OperatorImage = "ghcr.io/cloudnative-pg/cloudnative-pg:" + Version
	// OperandRepository is the repository of the Postgres images (the chart's default
	// postgresql.cloudnativepg.image); build-kind-images.sh tags its image with the Postgres
	// version it holds and with its major.
	OperandRepository = "ghcr.io/cloudnative-pg/postgresql"

	// The webhook configurations, whose caBundle the operator fills with a CA of its own.
	mutatingWebhook   = "cnpg-mutating-webhook-configuration"
	validatingWebhook = "cnpg-validating-webhook-configuration"
	fieldManager      = "polyaxon-deploy-e2e"
)

// Options say what Install installs and where.
type Options struct {
	// ModuleDir is the module's directory (EnsureBuild, ModuleDir): its CRDs and release
	// manifest. Required.
	ModuleDir string
	// Images are the images to load and run (BuildImages); an empty Operator is OperatorImage.
	Images Images
	// Kind, when set, is the provider Install loads Images into the nodes with (kind.Provider.
	// LoadImages: saved once, imported and unpacked node by node, pinned). Nil: the nodes have
	// them already.
	Kind *kind.Provider
	// Pools are the node pools whose nodes get the images: the operator's and every node a
	// Postgres instance may land on (an instance's init container runs the operator's image).
	// None: every node, the control plane's too.
	Pools []string
	// NodeSelector places the operator's pod (none: anywhere its image was loaded), and
	// Tolerations let it on tainted nodes (the control plane's).
	NodeSelector map[string]string
	Tolerations  []corev1.Toleration
	// PullPolicy is the operator container's imagePullPolicy (default Never: nothing here can
	// be pulled, as the repository's other local images).
	PullPolicy corev1.PullPolicy
	// Timeout bounds the wait for the Deployment and its webhooks (default 5 minutes).
	Timeout time.Duration
}

// OnControlPlane places the operator's pod on the control plane (its role label, its taint
// tolerated): a worker node drained or frozen by a test then never takes the operator along.
func (o Options) OnControlPlane() Options {
	const controlPlane = "node-role.kubernetes.io/control-plane"
	o.NodeSelector = map[string]string{controlPlane: ""}
	o.Tolerations = []corev1.Toleration{{Key: controlPlane, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
	return o
}

// Operator is an installed operator, with how long each step of Install took.
type Operator struct {
	Namespace, Deployment, Image string
	// Load is the images' load into the nodes (0 without Options.Kind); Apply the CRDs and
	// the release's objects; Available the wait for the Deployment; Webhooks the wait for a
	// dry run through both webhooks, after Available.
	Load, Apply, Available, Webhooks time.Duration
}

// Install loads the images (Options.Kind), applies the module's CRDs (config/crd/bases, and
// waits until each is Established) and every other object of releases/cnpg-<Version>.yaml
// with server-side apply, the operator's container running Options.Images.Operator (also its
// OPERATOR_IMAGE_NAME, the image of the instances' init container) with Options.PullPolicy,
// then waits until the Deployment is Available and a server-side dry run of a one-instance
// Cluster goes through both webhooks: the mutating one fills its defaults, the validating one
// refuses an image tagged latest. Applying again is harmless (the operator's caBundle stays).
func Install(ctx context.Context, c *cluster.Cluster, opts Options) (*Operator, error) {
	if opts.ModuleDir == "" {
		return nil, errors.New("cloudnativepg: Options.ModuleDir is required (EnsureBuild or ModuleDir)")
	}
	if opts.Images.Operator == "" {
		opts.Images.Operator = OperatorImage
	}
	if opts.PullPolicy == "" {
		opts.PullPolicy = corev1.PullNever
	}
	if opts.Timeout == 0 {
		opts.Timeout = 5 * time.Minute
	}
	op := &Operator{Namespace: Namespace, Deployment: DeploymentName, Image: opts.Images.Operator}

	start := time.Now()
	if opts.Kind != nil {
		if err := opts.Kind.LoadImages(ctx, c, kind.Images{Images: opts.Images.All(), Pools: opts.Pools}); err != nil {
			return nil, fmt.Errorf("cloudnativepg: %w", err)
		}
		op.Load = time.Since(start)
	}

	start = time.Now()
	dyn, err := dynamic.NewForConfig(c.RESTConfig)
	if err != nil {
		return nil, err
	}
	crds, err := applyCRDs(ctx, c, dyn, filepath.Join(opts.ModuleDir, "config", "crd", "bases"))
	if err != nil {
		return nil, err
	}
	objs, err := releaseObjects(filepath.Join(opts.ModuleDir, "releases", "cnpg-"+Version+".yaml"), crds)
	if err != nil {
		return nil, err
	}
	for i, o := range objs {
		if o.GetKind() == "Deployment" && o.GetName() == DeploymentName {
			if objs[i], err = localDeployment(o, opts); err != nil {
				return nil, err
			}
		}
	}
	if err := apply(ctx, c, dyn, objs); err != nil {
		return nil, err
	}
	op.Apply = time.Since(start)

	wctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	start = time.Now()
	if err := waitAvailable(wctx, c); err != nil {
		return nil, err
	}
	op.Available = time.Since(start)
	start = time.Now()
	operand := opts.Images.Operand
	if operand == "" {
		operand = OperandRepository + ":16" // a dry run pulls nothing: any version tag will do
	}
	if err := waitWebhooks(wctx, c, dyn, operand); err != nil {
		return nil, err
	}
	op.Webhooks = time.Since(start)
	return op, nil
}

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// applyCRDs applies every postgresql.cnpg.io_*.yaml of dir and waits until each CRD is
// Established; it returns their names.
func applyCRDs(ctx context.Context, c *cluster.Cluster, dyn dynamic.Interface, dir string) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "postgresql.cnpg.io_*.yaml"))
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("cloudnativepg: no CRDs in %s", dir)
	}
	var names []string
	for _, f := range files {
		objs, err := decodeFile(f)
		if err != nil {
			return nil, err
		}
		for _, o := range objs {
			if o.GetKind() != "CustomResourceDefinition" {
				return nil, fmt.Errorf("cloudnativepg: %s holds a %s", f, o.GetKind())
			}
			if _, err := dyn.Resource(crdGVR).Apply(ctx, o.GetName(), o, metav1.ApplyOptions{FieldManager: fieldManager, Force: true}); err != nil {
				return nil, fmt.Errorf("cloudnativepg: apply CRD %s: %w", o.GetName(), err)
			}
			names = append(names, o.GetName())
		}
	}
	for _, name := range names {
		err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			u, err := dyn.Resource(crdGVR).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, nil //nolint:nilerr // retried
			}
			var crd apiextensionsv1.CustomResourceDefinition
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &crd); err != nil {
				return false, err
			}
			for _, cond := range crd.Status.Conditions {
				if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			return nil, fmt.Errorf("cloudnativepg: CRD %s not established: %w", name, err)
		}
	}
	return names, nil
}

// releaseObjects are the release manifest's objects but its CRDs, in the file's order (the
// Namespace first). Each CRD of the manifest must be one of crds (applied from the module's
// config/crd/bases, of which the manifest is made).
func releaseObjects(path string, crds []string) ([]*unstructured.Unstructured, error) {
	objs, err := decodeFile(path)
	if err != nil {
		return nil, err
	}
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == "CustomResourceDefinition" {
			if !slices.Contains(crds, o.GetName()) {
				return nil, fmt.Errorf("cloudnativepg: %s has CRD %s, which config/crd/bases has not", path, o.GetName())
			}
			continue
		}
		out = append(out, o)
	}
	return out, nil
}

// decodeFile reads a file of YAML documents into objects (empty documents skipped).
func decodeFile(path string) ([]*unstructured.Unstructured, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cloudnativepg: %w", err)
	}
	dec := k8syaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 64*1024)
	var out []*unstructured.Unstructured
	for {
		var m map[string]any
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			return out, nil
		} else if err != nil {
			return nil, fmt.Errorf("cloudnativepg: %s: %w", path, err)
		}
		if len(m) == 0 {
			continue
		}
		out = append(out, &unstructured.Unstructured{Object: m})
	}
}

// localDeployment is the operator's Deployment running the local image, never pulled: its
// container's image and OPERATOR_IMAGE_NAME (the instances' init container), its pull
// policy, and the pod's node selector and tolerations.
func localDeployment(u *unstructured.Unstructured, opts Options) (*unstructured.Unstructured, error) {
	var d appsv1.Deployment
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &d); err != nil {
		return nil, fmt.Errorf("cloudnativepg: the release's Deployment: %w", err)
	}
	spec := &d.Spec.Template.Spec
	if len(spec.Containers) != 1 {
		return nil, fmt.Errorf("cloudnativepg: the release's Deployment has %d containers, want 1", len(spec.Containers))
	}
	ctr := &spec.Containers[0]
	ctr.Image, ctr.ImagePullPolicy = opts.Images.Operator, opts.PullPolicy
	found := false
	for i := range ctr.Env {
		if ctr.Env[i].Name == "OPERATOR_IMAGE_NAME" {
			ctr.Env[i].Value, found = opts.Images.Operator, true
		}
	}
	if !found {
		return nil, errors.New("cloudnativepg: the release's Deployment sets no OPERATOR_IMAGE_NAME")
	}
	if len(opts.NodeSelector) > 0 {
		spec.NodeSelector = opts.NodeSelector
	}
	spec.Tolerations = append(spec.Tolerations, opts.Tolerations...)
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&d)
	if err != nil {
		return nil, err
	}
	// Server-side apply owns every field it is sent: no status, no creation time.
	delete(m, "status")
	unstructured.RemoveNestedField(m, "metadata", "creationTimestamp")
	unstructured.RemoveNestedField(m, "spec", "template", "metadata", "creationTimestamp")
	out := &unstructured.Unstructured{Object: m}
	out.SetAPIVersion("apps/v1")
	out.SetKind("Deployment")
	return out, nil
}

// apply applies objs in order with server-side apply, each kind's resource found through
// discovery.
func apply(ctx context.Context, c *cluster.Cluster, dyn dynamic.Interface, objs []*unstructured.Unstructured) error {
	dc, err := discovery.NewDiscoveryClientForConfig(c.RESTConfig)
	if err != nil {
		return err
	}
	groups, err := restmapper.GetAPIGroupResources(dc)
	if err != nil {
		return fmt.Errorf("cloudnativepg: discovery: %w", err)
	}
	mapper := restmapper.NewDiscoveryRESTMapper(groups)
	for _, o := range objs {
		gvk := o.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return fmt.Errorf("cloudnativepg: %s %s: %w", gvk.Kind, o.GetName(), err)
		}
		var r dynamic.ResourceInterface = dyn.Resource(m.Resource)
		if m.Scope.Name() == "namespace" {
			r = dyn.Resource(m.Resource).Namespace(o.GetNamespace())
		}
		if _, err := r.Apply(ctx, o.GetName(), o, metav1.ApplyOptions{FieldManager: fieldManager, Force: true}); err != nil {
			return fmt.Errorf("cloudnativepg: apply %s %s: %w", gvk.Kind, o.GetName(), err)
		}
	}
	return nil
}

// waitAvailable returns once the operator's Deployment has rolled out and is Available.
func waitAvailable(ctx context.Context, c *cluster.Cluster) error {
	var d *appsv1.Deployment
	err := wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		var err error
		if d, err = c.Clientset.AppsV1().Deployments(Namespace).Get(ctx, DeploymentName, metav1.GetOptions{}); err != nil {
			return false, nil //nolint:nilerr // retried
		}
		want := int32(1)
		if d.Spec.Replicas != nil {
			want = *d.Spec.Replicas
		}
		if d.Status.ObservedGeneration < d.Generation || d.Status.UpdatedReplicas < want || d.Status.AvailableReplicas < want {
			return false, nil
		}
		for _, cond := range d.Status.Conditions {
			if cond.Type == appsv1.DeploymentAvailable && cond.Status == corev1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("cloudnativepg: Deployment %s/%s not Available: %w%s", Namespace, DeploymentName, err, operatorPods(context.Background(), c))
	}
	return nil
}

// waitWebhooks returns once a server-side dry run of a one-instance Cluster goes through the
// mutating webhook (which sets affinity.podAntiAffinityType, a default the CRD's schema does
// not have) and the validating one (which refuses an image tagged latest, with its reason).
// Until the operator has put its CA in both configurations, the API server cannot call them
// (failurePolicy Fail): the create is refused and tried again.
func waitWebhooks(ctx context.Context, c *cluster.Cluster, dyn dynamic.Interface, operand string) error {
	probe := func(image string) (*unstructured.Unstructured, error) {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": ClusterGVR.GroupVersion().String(),
			"kind":       "Cluster",
			"metadata":   map[string]any{"name": "webhook-probe", "namespace": Namespace},
			"spec": map[string]any{
				"instances": int64(1),
				"imageName": image,
				"storage":   map[string]any{"size": "1Gi"},
			},
		}}
		return dyn.Resource(ClusterGVR).Namespace(Namespace).Create(ctx, u, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	}
	var last error
	err := wait.PollUntilContextCancel(ctx, 2*time.Second, true, func(ctx context.Context) (bool, error) {
		got, err := probe(operand)
		if err != nil {
			last = err
			return false, nil
		}
		if v, _, _ := unstructured.NestedString(got.Object, "spec", "affinity", "podAntiAffinityType"); v == "" {
			last = errors.New("the dry run went through, but without the mutating webhook's defaults")
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("cloudnativepg: the webhooks did not answer a dry run: %v: %w%s", last, err, operatorPods(context.Background(), c))
	}
	repo := operand
	if i := strings.LastIndex(repo, ":"); i > strings.LastIndex(repo, "/") {
		repo = repo[:i]
	}
	_, err = probe(repo + ":latest")
	if err == nil {
		return errors.New("cloudnativepg: the validating webhook let a Cluster of an image tagged latest through")
	}
	if !apierrors.IsInvalid(err) && !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "admission webhook") {
		return fmt.Errorf("cloudnativepg: the validating webhook, asked about an image tagged latest: %w", err)
	}
	return nil
}

// operatorPods describes the operator's pods for an error: each one's phase, its container's
// state and restarts, and the end of its log.
func operatorPods(ctx context.Context, c *cluster.Cluster) string {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	pods, err := c.Clientset.CoreV1().Pods(Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=cloudnative-pg"})
	if err != nil || len(pods.Items) == 0 {
		return "; no operator pod"
	}
	sort.Slice(pods.Items, func(i, j int) bool { return pods.Items[i].Name < pods.Items[j].Name })
	var b strings.Builder
	for _, p := range pods.Items {
		fmt.Fprintf(&b, "\npod %s on %s: %s", p.Name, p.Spec.NodeName, p.Status.Phase)
		for _, st := range p.Status.ContainerStatuses {
			fmt.Fprintf(&b, ", %s ready=%v restarts=%d", st.Name, st.Ready, st.RestartCount)
			if w := st.State.Waiting; w != nil {
				fmt.Fprintf(&b, " waiting %s: %s", w.Reason, w.Message)
			}
		}
		tail := int64(20)
		if raw, err := c.Clientset.CoreV1().Pods(Namespace).GetLogs(p.Name, &corev1.PodLogOptions{TailLines: &tail}).DoRaw(ctx); err == nil {
			fmt.Fprintf(&b, "\n%s", raw)
		}
	}
	return b.String()
}
