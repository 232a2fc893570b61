package local

import (
	"bytes"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"
)

const (
	kwokAPIVersion       = "kwok.x-k8s.io/v1alpha1"
	kwokConfigAPIVersion = "config.kwok.x-k8s.io/v1alpha1"

	// FailAnnotation set to "true" on a pod makes the local provider's kwok fail it:
	// phase Failed, every container terminated with ExitCodeAnnotation's value (default 1).
	FailAnnotation = "polyaxon-deploy.test/fail"
	// ExitCodeAnnotation sets the exit code of a pod failed by FailAnnotation.
	ExitCodeAnnotation = "polyaxon-deploy.test/exit-code"
)

// ClusterExec maps `kubectl exec` into matching pods to a local command run by the kwok
// controller on this machine: the command of the exec request runs with Env added to the
// kwok controller's environment, in WorkDir. Pods match by namespace and name (kwok's
// ClusterExec selector has no label selector); empty lists match everything.
type ClusterExec struct {
	Name       string
	Namespaces []string
	Pods       []string
	// Containers limits the mapping to these containers; empty means all.
	Containers []string
	Env        map[string]string
	WorkDir    string
}

// Stage is one kwok Stage document (apiVersion kwok.x-k8s.io/v1alpha1, kind Stage).
type Stage struct {
	Name string
	YAML string
}

// ParseStage checks that doc is a kwok Stage and returns it.
func ParseStage(doc string) (Stage, error) {
	var m struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name string `json:"name"`
		} `json:"metadata"`
	}
	if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
		return Stage{}, fmt.Errorf("parse kwok Stage: %w", err)
	}
	if m.APIVersion != kwokAPIVersion || m.Kind != "Stage" || m.Metadata.Name == "" {
		return Stage{}, fmt.Errorf("parse kwok Stage: want apiVersion %s, kind Stage and metadata.name, got %q %q %q",
			kwokAPIVersion, m.APIVersion, m.Kind, m.Metadata.Name)
	}
	return Stage{Name: m.Metadata.Name, YAML: doc}, nil
}

// FailPodStage fails pending pods annotated FailAnnotation="true" after a short delay, with
// every container terminated (exit code from ExitCodeAnnotation, default 1). Its weight makes
// kwok prefer it over the default pod-ready stage, which matches the same pending pods.
// The local provider always installs it; it is inert for pods without the annotation.
func FailPodStage() Stage {
	return Stage{Name: "polyaxon-deploy-pod-fail", YAML: `apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: polyaxon-deploy-pod-fail
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchAnnotations:
      ` + FailAnnotation + `: "true"
    matchExpressions:
    - key: .metadata.deletionTimestamp
      operator: DoesNotExist
    - key: .status.phase
      operator: In
      values: ["Pending"]
  weight: 1000
  delay:
    durationMilliseconds: 500
  next:
    statusTemplate: |
      {{ $now := Now | Quote }}
      {{ $code := or ( index ( or .metadata.annotations dict ) "` + ExitCodeAnnotation + `" ) "1" }}
      phase: Failed
      startTime: {{ $now }}
      conditions:
      - type: Initialized
        status: "True"
        lastTransitionTime: {{ $now }}
      - type: Ready
        status: "False"
        reason: PodFailed
        lastTransitionTime: {{ $now }}
      - type: ContainersReady
        status: "False"
        reason: PodFailed
        lastTransitionTime: {{ $now }}
      containerStatuses:
      {{ range .spec.containers }}
      - name: {{ .name | Quote }}
        image: {{ .image | Quote }}
        ready: false
        started: false
        restartCount: 0
        state:
          terminated:
            exitCode: {{ $code }}
            reason: Error
            message: failed by ` + FailAnnotation + `
            startedAt: {{ $now }}
            finishedAt: {{ $now }}
      {{ end }}
`}
}

// kwokDefaultStageFiles are kwok's own default stages, copied next to the binaries by
// build-binaries.sh from the kwok module. kwokctl adds them only when the config has no
// Stage at all, so we add them ourselves whenever we add stages.
var kwokDefaultStageFiles = []string{
	"node-initialize.yaml",
	"node-heartbeat-with-lease.yaml",
	"pod-ready.yaml",
	"pod-complete.yaml",
	"pod-delete.yaml",
}

func loadDefaultStages(binDir string) ([]Stage, error) {
	var out []Stage
	for _, f := range kwokDefaultStageFiles {
		p := filepath.Join(binDir, "kwok-stages", f)
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("kwok default stage %s: %w (rerun e2e/scripts/build-binaries.sh)", p, err)
		}
		s, err := ParseStage(string(b))
		if err != nil {
			return nil, fmt.Errorf("kwok default stage %s: %w", p, err)
		}
		out = append(out, s)
	}
	return out, nil
}

// kwokctlOptions are the KwokctlConfiguration options the local provider sets.
type kwokctlOptions struct {
	KubeVersion string
	BinDir      string
	Ports       componentPortSet
	// EnableCRDs are kwok kinds read from the API server at run time instead of the config.
	EnableCRDs []string
}

// renderKwokConfig writes the multi-document config passed to `kwokctl -c`.
func renderKwokConfig(o kwokctlOptions, stages []Stage, execs []ClusterExec) ([]byte, error) {
	bin := func(n string) string { return filepath.Join(o.BinDir, n) }
	opts := map[string]any{
		"runtime": "binary",
		// Every component listens on loopback only (kwok's default is 0.0.0.0).
		"bindAddress":                 "127.0.0.1",
		"kubeApiserverBinary":         bin("kube-apiserver"),
		"kubeControllerManagerBinary": bin("kube-controller-manager"),
		"kubeSchedulerBinary":         bin("kube-scheduler"),
		"kwokControllerBinary":        bin("kwok"),
		"etcdBinary":                  bin("etcd"),
		"kubectlBinary":               bin("kubectl"),
		"quietPull":                   true,
	}
	if o.KubeVersion != "" {
		opts["kubeVersion"] = o.KubeVersion
	}
	if len(o.EnableCRDs) > 0 {
		opts["enableCRDs"] = o.EnableCRDs
	}
	for key, port := range map[string]uint32{
		"etcdPort":                  o.Ports.Etcd,
		"etcdPeerPort":              o.Ports.EtcdPeer,
		"kubeApiserverPort":         o.Ports.APIServer,
		"kubeControllerManagerPort": o.Ports.ControllerManager,
		"kubeSchedulerPort":         o.Ports.Scheduler,
		"kwokControllerPort":        o.Ports.Kwok,
	} {
		if port != 0 { // 0: kwokctl picks one
			opts[key] = port
		}
	}
	docs := []any{map[string]any{
		"apiVersion": kwokConfigAPIVersion,
		"kind":       "KwokctlConfiguration",
		"metadata":   map[string]any{},
		"options":    opts,
	}}
	seen := map[string]bool{}
	for _, e := range execs {
		if e.Name == "" {
			return nil, fmt.Errorf("ClusterExec: name required")
		}
		if seen["exec/"+e.Name] {
			return nil, fmt.Errorf("ClusterExec %q: duplicate name", e.Name)
		}
		seen["exec/"+e.Name] = true
		docs = append(docs, clusterExecDoc(e))
	}
	var buf bytes.Buffer
	for _, d := range docs {
		b, err := yaml.Marshal(d)
		if err != nil {
			return nil, fmt.Errorf("render kwok config: %w", err)
		}
		buf.WriteString("---\n")
		buf.Write(b)
	}
	for _, s := range stages {
		if seen["stage/"+s.Name] {
			return nil, fmt.Errorf("Stage %q: duplicate name", s.Name)
		}
		seen["stage/"+s.Name] = true
		buf.WriteString("---\n")
		buf.WriteString(strings.TrimSpace(s.YAML))
		buf.WriteString("\n")
	}
	return buf.Bytes(), nil
}

func clusterExecDoc(e ClusterExec) map[string]any {
	local := map[string]any{}
	if e.WorkDir != "" {
		local["workDir"] = e.WorkDir
	}
	if len(e.Env) > 0 {
		var envs []map[string]string
		for _, k := range slices.Sorted(maps.Keys(e.Env)) {
			envs = append(envs, map[string]string{"name": k, "value": e.Env[k]})
		}
		local["envs"] = envs
	}
	target := map[string]any{"local": local}
	if len(e.Containers) > 0 {
		target["containers"] = e.Containers
	}
	spec := map[string]any{"execs": []any{target}}
	sel := map[string]any{}
	if len(e.Namespaces) > 0 {
		sel["matchNamespaces"] = e.Namespaces
	}
	if len(e.Pods) > 0 {
		sel["matchNames"] = e.Pods
	}
	if len(sel) > 0 {
		spec["selector"] = sel
	}
	return map[string]any{
		"apiVersion": kwokAPIVersion,
		"kind":       "ClusterExec",
		"metadata":   map[string]any{"name": e.Name},
		"spec":       spec,
	}
}
