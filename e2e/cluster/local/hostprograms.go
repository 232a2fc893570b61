package local

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster"
)

// Program is what runs on this machine for the containers of one image (WithHostPrograms).
// The image's own entrypoint is not run (its files are not here); Command says what it would
// start.
type Program struct {
	// Image is the image's repository ("polyaxon/polyaxon-api"): the first container of a pod
	// whose image is this repository, at any tag or digest, runs the program.
	Image string
	// Command is the argv for a container of the image.
	Command func(c ProgramContainer) ([]string, error)
	// ExecProbe is what runs here for an exec probe of the image (nil: exec probes fail).
	ExecProbe func(c ProgramContainer, probe []string) ([]string, error)
	// ImageEnv is what the image sets that the pod does not: the container's own env wins.
	ImageEnv []EnvVar
	// EnvOverrides set variables after the pod's env, replacing its values, each a
	// HostRewrites row.
	EnvOverrides map[string]string
	// HostEnv, when set, gives variables that depend on where the container's files are here
	// (its mounts, HOME, KUBECONFIG), set after everything else, each a HostRewrites row.
	HostEnv func(c ProgramContainer) ([]EnvVar, error)
	// AwaitsTermHandler: as a native sidecar, the pod goes on once the program handles
	// SIGTERM (or ended). A kubelet's container start and its notice of a short run's end give
	// a real sidecar a second or more to get there; the runner here takes milliseconds, and a
	// process that is not a container's first one dies of an early SIGTERM.
	AwaitsTermHandler bool
}

// ProgramContainer is a container as its Program sees it.
type ProgramContainer struct {
	Pod *corev1.Pod
	// Image is the container's image reference.
	Image string
	// Command and Args are the container's, with $(VAR) expanded as the kubelet does.
	Command, Args []string
	// Ports maps each container port of the pod to the loopback port that stands for it: the
	// program listens on its own, and reaches its pod's other containers on theirs.
	Ports map[int32]int
	Env   []EnvVar
	// Mounts maps each of the container's mount paths to the directory on this machine.
	Mounts map[string]string
}

// Tag is the image's tag ("" for none or a digest alone).
func (c ProgramContainer) Tag() string {
	repo := imageRepository(c.Image)
	image := strings.SplitN(c.Image, "@", 2)[0]
	if len(image) > len(repo) {
		return image[len(repo)+1:]
	}
	return ""
}

// Port is the loopback port for container port p (0 when the container does not declare it).
func (c ProgramContainer) Port(p int32) int { return c.Ports[p] }

// Lookup is a variable of the container's environment.
func (c ProgramContainer) Lookup(name string) (string, bool) {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value, true
		}
	}
	return "", false
}

// WithHostPrograms runs programs on this machine for the pods whose first container's image
// is one of theirs (local provider), for as long as the Cluster handle lives: see
// HostProgramStages and doc.go.
func WithHostPrograms(programs ...Program) cluster.CreateOption {
	return localOption(func(o *localOptions) { o.Programs = append(o.Programs, programs...) })
}

// WithHostProgramStages prepares a cluster for programs that another process runs later
// (RunHostPrograms on a handle from Get): kwok leaves their pods to it. `make demo` does this,
// as the process that creates the cluster ends.
func WithHostProgramStages(programs ...Program) cluster.CreateOption {
	return localOption(func(o *localOptions) { o.ProgramStages = append(o.ProgramStages, programs...) })
}

// WithHostBackend says that address (host:port, on this machine) answers containerPort of
// pod in namespace, a simulated pod backed by a real server (the Postgres pod's PostgreSQL):
// the Services that select the pod forward to it.
func WithHostBackend(namespace, pod string, containerPort int32, address string) cluster.CreateOption {
	return localOption(func(o *localOptions) {
		o.Backends = append(o.Backends, HostBackend{namespace, pod, containerPort, address})
	})
}

// HostBackend is one WithHostBackend.
type HostBackend struct {
	Namespace, Pod string
	Port           int32
	Address        string
}

// imageRepositoryQuery is the jq expression kwok evaluates for a pod's first image without
// its tag or digest.
const imageRepositoryQuery = `.spec.containers.[0].image | sub("@.*$"; "") | sub(":[^:/]*$"; "")`

// HostProgramStages keep kwok from running the pods that host programs stand behind: such a
// pod becomes Running with its containers started but not Ready (kwok's pod-ready stage loses
// to the weight), and stays so; the runner marks it Ready when its readiness probe passes and
// ends it when the process exits. Pods annotated FailAnnotation keep kwok's failure.
func HostProgramStages(programs []Program) []Stage {
	var images []string
	for _, p := range programs {
		images = append(images, fmt.Sprintf("%q", p.Image))
	}
	match := `
    - key: .metadata.deletionTimestamp
      operator: DoesNotExist
    - key: '` + imageRepositoryQuery + `'
      operator: In
      values: [` + strings.Join(images, ", ") + `]
    - key: '.metadata.annotations["` + FailAnnotation + `"]'
      operator: DoesNotExist`
	start := `apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: polyaxon-deploy-host-program-start
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: .status.phase
      operator: In
      values: ["Pending"]` + match + `
  weight: 1000
  next:
    statusTemplate: |
      {{ $now := Now }}
      conditions:
      - {type: Initialized, status: "True", lastTransitionTime: {{ $now | Quote }}}
      - {type: Ready, status: "False", reason: ContainersNotReady, lastTransitionTime: {{ $now | Quote }}}
      - {type: ContainersReady, status: "False", reason: ContainersNotReady, lastTransitionTime: {{ $now | Quote }}}
      containerStatuses:
      {{ range .spec.containers }}
      - name: {{ .name | Quote }}
        image: {{ .image | Quote }}
        ready: false
        started: true
        restartCount: 0
        state:
          running:
            startedAt: {{ $now | Quote }}
      {{ end }}
      {{ $podIPs := PodIPsWith .spec.nodeName ( or .spec.hostNetwork false ) ( or .metadata.uid "" ) ( or .metadata.name "" ) ( or .metadata.namespace "" ) }}
      {{ with $podIPs }}
      podIP: {{ index . 0 | Quote }}
      podIPs:
      {{ range . }}
      - ip: {{ . | Quote }}
      {{ end }}
      {{ end }}
      phase: Running
      startTime: {{ $now | Quote }}
`
	// Its patch changes nothing, so kwok applies nothing; it only outweighs pod-complete.
	hold := `apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: polyaxon-deploy-host-program-hold
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: .status.phase
      operator: In
      values: ["Running"]` + match + `
  weight: 1000
  next:
    statusTemplate: |
      phase: Running
`
	return []Stage{{Name: "polyaxon-deploy-host-program-start", YAML: start}, {Name: "polyaxon-deploy-host-program-hold", YAML: hold}}
}

// imageRepository is image without its tag or digest (imageRepositoryQuery, in Go).
func imageRepository(image string) string {
	if i := strings.IndexByte(image, '@'); i >= 0 {
		image = image[:i]
	}
	if i := strings.LastIndexByte(image, ':'); i >= 0 && !strings.Contains(image[i:], "/") {
		image = image[:i]
	}
	return image
}

// hostRunner starts, probes and stops the host programs of a cluster's pods.
type hostRunner struct {
	c        *cluster.Cluster
	dir      string // <cluster dir>/pods
	programs map[string]Program
	backends *backendTable
	proxy    *serviceProxy
	dyn      dynamic.Interface

	mu      sync.Mutex
	running map[types.UID]*hostPod
}

func newHostRunner(c *cluster.Cluster, dir string, programs []Program, backends []HostBackend) (*hostRunner, error) {
	dyn, err := dynamic.NewForConfig(c.RESTConfig)
	if err != nil {
		return nil, err
	}
	r := &hostRunner{c: c, dir: dir, programs: map[string]Program{}, backends: newBackendTable(), dyn: dyn, running: map[types.UID]*hostPod{}}
	for _, p := range programs {
		r.programs[p.Image] = p
	}
	for _, b := range backends {
		r.backends.set(b.Namespace, b.Pod, b.Port, b.Address)
	}
	r.proxy = newServiceProxy(c.Clientset, r.backends)
	return r, nil
}

// run watches pods until ctx ends, then stops every process.
func (r *hostRunner) run(ctx context.Context) {
	f := informers.NewSharedInformerFactory(r.c.Clientset, 0)
	inf := f.Core().V1().Pods().Informer()
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { r.observe(ctx, obj) },
		UpdateFunc: func(_, obj any) { r.observe(ctx, obj) },
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if p, ok := obj.(*corev1.Pod); ok {
				r.stop(p)
			}
		},
	})
	f.Start(ctx.Done())
	<-ctx.Done()
	f.Shutdown()
	r.mu.Lock()
	pods := make([]*hostPod, 0, len(r.running))
	for _, hp := range r.running {
		pods = append(pods, hp)
	}
	r.mu.Unlock()
	// As a node that stops: each container gets its pod's grace period, and its exit is
	// written to the pod (a runner started later starts it again).
	var wg sync.WaitGroup
	for _, hp := range pods {
		wg.Go(func() { hp.halt(hp.grace, false); <-hp.done })
	}
	wg.Wait()
	r.proxy.Close()
}

func (r *hostRunner) observe(ctx context.Context, obj any) {
	p, ok := obj.(*corev1.Pod)
	if !ok || len(p.Spec.Containers) == 0 {
		return
	}
	if p.DeletionTimestamp != nil {
		r.stop(p)
		return
	}
	prog, ok := r.programs[imageRepository(p.Spec.Containers[0].Image)]
	if !ok || p.Status.Phase != corev1.PodRunning || p.Annotations[FailAnnotation] == "true" {
		return
	}
	r.mu.Lock()
	_, seen := r.running[p.UID]
	var hp *hostPod
	if !seen {
		hctx, cancel := context.WithCancel(ctx)
		hp = &hostPod{ctx: hctx, cancel: cancel, done: make(chan struct{}), grace: terminationGrace(p)}
		r.running[p.UID] = hp
	}
	r.mu.Unlock()
	if seen {
		return
	}
	go func(p *corev1.Pod) {
		if err := r.serveLogs(ctx, p, append(r.runContainers(p), r.nativeSidecars(p)...)); err != nil && ctx.Err() == nil {
			fmt.Fprintf(os.Stderr, "host program for %s/%s: logs: %v\n", p.Namespace, p.Name, err)
		}
		r.supervise(ctx, hp, p, prog)
	}(p.DeepCopy())
}

// stop ends a pod's process, for good: its pod is being deleted. The process gets the
// deletion's grace period between SIGTERM and SIGKILL.
func (r *hostRunner) stop(p *corev1.Pod) {
	r.mu.Lock()
	hp := r.running[p.UID]
	r.mu.Unlock()
	if hp == nil {
		return
	}
	// Claimed here, in the informer's order: the deletion's update comes before kwok's
	// removal of the pod (grace 0), and its grace period must win.
	if stop := hp.beginHalt(true); stop != nil {
		go stop(terminationGrace(p))
	}
}

// podDir is the directory of a pod's files on this machine: its volumes, home and logs.
func (r *hostRunner) podDir(p *corev1.Pod) string { return podDir(r.dir, p) }

func podDir(podsDir string, p *corev1.Pod) string {
	return filepath.Join(podsDir, fmt.Sprintf("%s_%s_%s", p.Namespace, p.Name, string(p.UID)[:8]))
}

// containerLog is the file a container's process writes its output to, in the CRI log format.
func (r *hostRunner) containerLog(p *corev1.Pod, container string) string {
	return filepath.Join(r.podDir(p), container+".log")
}

// prepare makes what one start of container c of the pod (its first container, a companion, or
// an init container) needs, as the kubelet does for each start of a container: its volumes
// written, its environment computed, its ports chosen. ports, when not nil, are the pod's
// (podPorts), shared by its containers as a pod's network is; nil chooses c's own.
func (r *hostRunner) prepare(ctx context.Context, p *corev1.Pod, c *corev1.Container, prog Program, ports map[int32]int) (*HostProcess, ProgramContainer, error) {
	dir := r.podDir(p)
	if err := os.MkdirAll(filepath.Join(dir, "home"), 0o755); err != nil {
		return nil, ProgramContainer{}, err
	}
	mounts, kubeconfig, err := prepareMounts(ctx, r.c, p, c, dir)
	if err != nil {
		return nil, ProgramContainer{}, err
	}
	podEnv, err := ContainerEnv(ctx, r.c.Clientset, p, c)
	if err != nil {
		return nil, ProgramContainer{}, err
	}
	env := envList{}
	for _, e := range prog.ImageEnv {
		env.set(e.Name, e.Value)
	}
	for _, e := range podEnv {
		env.set(e.Name, e.Value)
	}
	services, err := r.c.Clientset.CoreV1().Services("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, ProgramContainer{}, err
	}
	rw := newRewriter(p.Namespace, services.Items, r.proxy.Address, mounts)
	vars, err := rw.apply(env.vars)
	if err != nil {
		return nil, ProgramContainer{}, err
	}
	env = envList{}
	for _, e := range vars {
		env.set(e.Name, e.Value)
	}
	for name, v := range prog.EnvOverrides {
		if old, ok := env.lookup(name); !ok || old != v {
			env.set(name, v)
			rw.note(name, old, v)
		}
	}
	env.set("HOME", filepath.Join(dir, "home"))
	if kubeconfig != "" {
		env.set("KUBECONFIG", kubeconfig)
	}
	if ports == nil {
		if ports, err = containerPorts(c); err != nil {
			return nil, ProgramContainer{}, err
		}
	}
	pc := ProgramContainer{Pod: p, Image: c.Image, Env: env.vars, Ports: ports, Mounts: mounts}
	if prog.HostEnv != nil {
		vars, err := prog.HostEnv(pc)
		if err != nil {
			return nil, pc, err
		}
		for _, e := range vars {
			old, _ := env.lookup(e.Name)
			env.set(e.Name, e.Value)
			rw.note(e.Name, old, e.Value)
		}
		pc.Env = env.vars
	}
	pc.Command = expandAll(c.Command, env.lookup)
	pc.Args = expandAll(c.Args, env.lookup)
	argv, err := prog.Command(pc)
	if err != nil {
		return nil, pc, err
	}
	if err := os.WriteFile(filepath.Join(dir, "rewrites.txt"), []byte(strings.Join(rw.log, "\n")+"\n"), 0o644); err != nil {
		return nil, pc, err
	}
	proc := &HostProcess{Path: argv[0], Args: argv[1:], Env: processEnv(env.vars), Dir: filepath.Join(dir, "home"),
		LogPath: r.containerLog(p, c.Name), PreStop: preStopSleep(c)}
	return proc, pc, nil
}

// preStopSleep is the container's preStop sleep action (the only hook the runner carries out).
func preStopSleep(c *corev1.Container) time.Duration {
	if c.Lifecycle == nil || c.Lifecycle.PreStop == nil || c.Lifecycle.PreStop.Sleep == nil {
		return 0
	}
	return time.Duration(c.Lifecycle.PreStop.Sleep.Seconds) * time.Second
}

// logsGVR is kwok's Logs resource (served as a CRD: the local provider enables it).
var logsGVR = schema.GroupVersionResource{Group: "kwok.x-k8s.io", Version: "v1alpha1", Resource: "logs"}

// serveLogs makes `kubectl logs` of the pod show the process's output: a kwok Logs object
// named like the pod, owned by it (so it goes with the pod).
func (r *hostRunner) serveLogs(ctx context.Context, p *corev1.Pod, containers []string) error {
	logs := make([]any, 0, len(containers))
	for _, name := range containers {
		path := r.containerLog(p, name)
		logs = append(logs, map[string]any{"containers": []any{name}, "logsFile": path, "previousLogsFile": previousLog(path)})
	}
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kwok.x-k8s.io/v1alpha1",
		"kind":       "Logs",
		"metadata": map[string]any{
			"name":      p.Name,
			"namespace": p.Namespace,
			"ownerReferences": []any{map[string]any{
				"apiVersion": "v1", "kind": "Pod", "name": p.Name, "uid": string(p.UID),
			}},
		},
		"spec": map[string]any{"logs": logs},
	}}
	_, err := r.dyn.Resource(logsGVR).Namespace(p.Namespace).Create(ctx, obj, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil // a runner started again (make demo): the pod's directory, so its log, is the same
	}
	return err
}

func expandAll(in []string, lookup func(string) (string, bool)) []string {
	out := make([]string, len(in))
	for i, s := range in {
		out[i] = ExpandVars(s, lookup)
	}
	return out
}

// processEnv is the process's environment: the container's, on this machine's PATH.
func processEnv(vars []EnvVar) []string {
	out := make([]string, 0, len(vars)+1)
	hasPath := false
	for _, e := range vars {
		if e.Name == "PATH" {
			hasPath = true
		}
		out = append(out, e.Name+"="+e.Value)
	}
	if !hasPath {
		out = append(out, "PATH="+os.Getenv("PATH"))
	}
	return out
}
