// Package releasetest holds offline fixtures for the release lifecycle: a Helm configuration on
// the memory storage driver, a fake kube client whose waits can fail or block, a fake clientset,
// and small charts. For pure lifecycle logic only; the e2e suite runs the same code against a
// real API server.
package releasetest

import (
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/kube"
	kubefake "helm.sh/helm/v3/pkg/kube/fake"
	"helm.sh/helm/v3/pkg/storage"
	"helm.sh/helm/v3/pkg/storage/driver"
	k8sfake "k8s.io/client-go/kubernetes/fake"

	"github.com/polyaxon-deploy/polyaxon-deploy/charts"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/release"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/render"
)

// Namespace and Name of the fixture release.
const (
	Namespace = "polyaxon"
	Name      = "polyaxon"
)

// Kube is a Helm kube client that prints nothing and lets a test fail or block its waits.
type Kube struct {
	kubefake.PrintingKubeClient

	mu sync.Mutex
	// WaitErrors[n] is returned by the n-th wait (1-based, Wait and WaitWithJobs together).
	WaitErrors map[int]error
	block      chan struct{}
	started    chan struct{}
	// OnCreate runs when Helm creates the release's objects (install).
	OnCreate func()
	waits    int
}

// NewKube returns a Kube with no failures.
func NewKube() *Kube {
	return &Kube{PrintingKubeClient: kubefake.PrintingKubeClient{Out: io.Discard}, WaitErrors: map[int]error{}}
}

// Waits is how many waits Helm asked for.
func (k *Kube) Waits() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.waits
}

func (k *Kube) wait() error {
	k.mu.Lock()
	k.waits++
	n := k.waits
	err := k.WaitErrors[n]
	block, started := k.block, k.started
	k.mu.Unlock()
	if block != nil {
		if started != nil {
			started <- struct{}{}
		}
		<-block
		return fmt.Errorf("wait aborted")
	}
	return err
}

// BlockWaits makes the following waits block until release is called (release is idempotent);
// started receives one value per blocked wait.
func (k *Kube) BlockWaits() (started <-chan struct{}, release func()) {
	k.mu.Lock()
	defer k.mu.Unlock()
	b, s := make(chan struct{}), make(chan struct{}, 16)
	k.block, k.started = b, s
	var once sync.Once
	return s, func() { once.Do(func() { close(b) }) }
}

// StopBlocking makes later waits return at once again; waits already blocked stay blocked
// until their release.
func (k *Kube) StopBlocking() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.block, k.started = nil, nil
}

func (k *Kube) Wait(kube.ResourceList, time.Duration) error         { return k.wait() }
func (k *Kube) WaitWithJobs(kube.ResourceList, time.Duration) error { return k.wait() }

func (k *Kube) Create(r kube.ResourceList) (*kube.Result, error) {
	if k.OnCreate != nil {
		k.OnCreate()
	}
	return k.PrintingKubeClient.Create(r)
}

// Fixture is a release client on offline fakes.
type Fixture struct {
	Client    *release.Client
	Config    *action.Configuration
	Kube      *Kube
	Clientset *k8sfake.Clientset
	Progress  *SyncBuffer
}

// New builds a Fixture for release Name in Namespace.
func New(t testing.TB, opts ...release.Option) *Fixture {
	t.Helper()
	mem := driver.NewMemory()
	mem.SetNamespace(Namespace)
	k := NewKube()
	cfg := &action.Configuration{
		Releases:     storage.Init(mem),
		KubeClient:   k,
		Capabilities: chartutil.DefaultCapabilities,
		Log:          func(string, ...interface{}) {},
	}
	cs := k8sfake.NewClientset()
	progress := &SyncBuffer{}
	opts = append([]release.Option{release.WithProgress(progress)}, opts...)
	return &Fixture{
		Client:    release.NewFromConfiguration(cfg, cs, Namespace, Name, opts...),
		Config:    cfg,
		Kube:      k,
		Clientset: cs,
		Progress:  progress,
	}
}

// SyncBuffer is a goroutine-safe progress sink.
type SyncBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	return len(p), nil
}

func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}

const deployment = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Release.Name }}-gateway
  labels:
    app.kubernetes.io/name: polyaxon
    app.kubernetes.io/instance: {{ .Release.Name }}
    app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
    helm.sh/chart: polyaxon-{{ .Chart.Version }}
spec:
  replicas: {{ .Values.gateway.replicas }}
  template:
    spec:
      containers:
        - name: gateway
          image: polyaxon/polyaxon-api:{{ .Values.image.tag | default .Chart.AppVersion }}
`

const statefulSet = `{{- if .Values.postgresql.enabled }}
apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: {{ .Release.Name }}-postgresql
  labels:
    app.kubernetes.io/name: polyaxon
    app.kubernetes.io/instance: {{ .Release.Name }}
    app.kubernetes.io/component: postgresql
  annotations:
    polyaxon-deploy/postgres-major: {{ regexFind "^[0-9]+" (toString .Values.postgresql.image.tag) | quote }}
spec:
  template:
    spec:
      containers:
        - name: postgresql
          image: postgres:{{ .Values.postgresql.image.tag }}
  volumeClaimTemplates:
    - metadata:
        name: data-pg{{ regexFind "^[0-9]+" (toString .Values.postgresql.image.tag) }}
      spec:
        accessModes: [ReadWriteOnce]
        resources:
          requests:
            storage: 1Gi
{{- end }}
`

const helpers = "templates/_helpers.tpl"

// ChartNames are the embedded chart's names for release with vals: its own helpers, as an
// install has them.
func ChartNames(t testing.TB, release string, vals map[string]any) render.Names {
	t.Helper()
	ch, err := render.LoadFS(charts.FS, charts.Root)
	if err != nil {
		t.Fatalf("embedded chart: %v", err)
	}
	n, err := render.NamesOf(ch, vals, release)
	if err != nil {
		t.Fatalf("the chart's names for release %s: %v", release, err)
	}
	return n
}

func embedded(name string) []byte {
	b, err := charts.ReadFile(name)
	if err != nil {
		panic("embedded chart: " + err.Error())
	}
	return b
}

// Chart returns a small chart named polyaxon with the given chart and app versions and optional
// annotations (e.g. polyaxon-deploy/upgrade-from).
func Chart(version, appVersion string, annotations map[string]string) *chart.Chart {
	return &chart.Chart{
		Metadata: &chart.Metadata{
			APIVersion:  chart.APIVersionV2,
			Name:        "polyaxon",
			Version:     version,
			AppVersion:  appVersion,
			Annotations: annotations,
		},
		Templates: []*chart.File{
			// The real chart's helpers: the installer reads the release's names through them.
			{Name: helpers, Data: embedded(helpers)},
			{Name: "templates/gateway/deployment.yaml", Data: []byte(deployment)},
			{Name: "templates/postgresql/statefulset.yaml", Data: []byte(statefulSet)},
			{Name: "templates/NOTES.txt", Data: []byte("Polyaxon {{ .Chart.AppVersion }} installed.\n")},
		},
		Values: map[string]any{
			"image":   map[string]any{"tag": ""},
			"gateway": map[string]any{"replicas": 1},
			"secrets": map[string]any{"existingSecret": ""},
			"postgresql": map[string]any{
				"enabled": true,
				"image":   map[string]any{"tag": "16"},
			},
		},
	}
}
