package local

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// fixedObjects is an objectReader over fixed ConfigMaps and Secrets.
type fixedObjects struct {
	configMaps map[string]map[string]string
	secrets    map[string]map[string][]byte
}

func (f fixedObjects) configMap(_ context.Context, _, name string) (map[string]string, error) {
	if d, ok := f.configMaps[name]; ok {
		return d, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "configmaps"}, name)
}

func (f fixedObjects) secret(_ context.Context, _, name string) (map[string][]byte, error) {
	if d, ok := f.secrets[name]; ok {
		return d, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, name)
}

func envMap(vars []EnvVar) map[string]string {
	m := map[string]string{}
	for _, v := range vars {
		m[v.Name] = v.Value
	}
	return m
}

func TestContainerEnvAsTheKubeletComputesIt(t *testing.T) {
	yes := true
	objs := fixedObjects{
		configMaps: map[string]map[string]string{
			"config": {"A": "from-config", "B": "b", "not a name": "skipped"},
			"agent":  {"A": "from-agent"},
		},
		secrets: map[string]map[string][]byte{"platform": {"KEY": []byte("s3cret")}},
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "gateway-0", Namespace: "polyaxon", Labels: map[string]string{"app": "x"}},
		Spec:       corev1.PodSpec{NodeName: "core-0", ServiceAccountName: "gw"},
		Status:     corev1.PodStatus{PodIP: "10.0.0.3"},
	}
	c := &corev1.Container{
		Name: "gateway",
		EnvFrom: []corev1.EnvFromSource{
			{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "config"}}},
			{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "agent"}}},
			{Prefix: "P_", SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "platform"}}},
			{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "missing"}, Optional: &yes}},
		},
		Env: []corev1.EnvVar{
			{Name: "B", Value: "$(A)-and-$(UNDEFINED)-$$(A)"},
			{Name: "PASSWORD", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "platform"}, Key: "KEY"}}},
			{Name: "NODE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}},
			{Name: "IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
			{Name: "NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
			{Name: "LABEL", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels['app']"}}},
			{Name: "MEM", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.memory", Divisor: resource.MustParse("1Mi")}}},
			{Name: "OPT", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "config"}, Key: "NOPE", Optional: &yes}}},
		},
		Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")}},
	}
	vars, err := containerEnv(context.Background(), objs, pod, c)
	require.NoError(t, err)
	env := envMap(vars)
	assert.Equal(t, "from-agent", env["A"], "a later envFrom source wins")
	assert.Equal(t, "from-agent-and-$(UNDEFINED)-$(A)", env["B"], "env wins over envFrom; $(VAR) expands, an undefined one stays, $$ escapes")
	assert.Equal(t, "s3cret", env["P_KEY"], "a prefix is prepended")
	assert.NotContains(t, env, "not a name", "a key that is no variable name is skipped")
	assert.Equal(t, "s3cret", env["PASSWORD"])
	assert.Equal(t, "core-0", env["NODE"])
	assert.Equal(t, "10.0.0.3", env["IP"])
	assert.Equal(t, "gateway-0", env["NAME"])
	assert.Equal(t, "x", env["LABEL"])
	assert.Equal(t, "256", env["MEM"])
	assert.NotContains(t, env, "OPT", "a missing optional key defines nothing")
	assert.Equal(t, "A", vars[0].Name, "the order of first definition is kept")

	// A missing source that is not optional refuses to start the container, with its name.
	c.Env = append(c.Env, corev1.EnvVar{Name: "X", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "platform"}, Key: "ABSENT"}}})
	_, err = containerEnv(context.Background(), objs, pod, c)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "Secret platform has no key ABSENT")
}

func TestRewriterTurnsServicesAndMountsIntoHostAddresses(t *testing.T) {
	services := []corev1.Service{
		{ObjectMeta: metav1.ObjectMeta{Name: "polyaxon-gateway", Namespace: "polyaxon"}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "polyaxon-postgresql", Namespace: "polyaxon"}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 5432}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: "elsewhere"}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}},
	}
	address := func(ns, svc string, port int32) (string, error) {
		return fmt.Sprintf("127.0.0.1:%d", map[string]int{"polyaxon-gateway": 30080, "polyaxon-postgresql": 35432, "other": 39999}[svc]), nil
	}
	r := newRewriter("polyaxon", services, address, map[string]string{"/plx-artifacts": "/pods/gw/volumes/artifacts", "/tmp": "/pods/gw/volumes/tmp"})
	env, err := r.apply([]EnvVar{
		{"POLYAXON_HOST", "http://polyaxon-gateway.polyaxon.svc.cluster.local:80"},
		{"POLYAXON_DB_HOST", "polyaxon-postgresql"},
		{"POLYAXON_DB_PORT", "5432"},
		{"POLYAXON_PROXY_API_HOST", "polyaxon-gateway.polyaxon.svc"},
		{"POLYAXON_PROXY_API_PORT", "80"},
		{"POLYAXON_PROXY_API_TARGET_PORT", "8000"},
		{"OTHER", "http://other/x"},
		{"OTHER_NS", "http://other.elsewhere/x"},
		{"STORE", `{"schema":{"mountPath":"/plx-artifacts"}}`},
		{"HOME_ISH", "/tmpfoo"},
		{"UNRELATED", "polyaxon-gateway-like"},
	})
	require.NoError(t, err)
	got := envMap(env)
	assert.Equal(t, "http://127.0.0.1:30080", got["POLYAXON_HOST"])
	assert.Equal(t, "127.0.0.1", got["POLYAXON_DB_HOST"])
	assert.Equal(t, "35432", got["POLYAXON_DB_PORT"])
	assert.Equal(t, "127.0.0.1", got["POLYAXON_PROXY_API_HOST"])
	assert.Equal(t, "30080", got["POLYAXON_PROXY_API_PORT"])
	assert.Equal(t, "8000", got["POLYAXON_PROXY_API_TARGET_PORT"], "a target port is the container's, not the Service's")
	assert.Equal(t, "http://other/x", got["OTHER"], "a short name reaches only the pod's own namespace")
	assert.Equal(t, "http://127.0.0.1:39999/x", got["OTHER_NS"])
	assert.Equal(t, `{"schema":{"mountPath":"/pods/gw/volumes/artifacts"}}`, got["STORE"])
	assert.Equal(t, "/tmpfoo", got["HOME_ISH"], "a mount path only at a path boundary")
	assert.Equal(t, "polyaxon-gateway-like", got["UNRELATED"])
	assert.Len(t, r.log, 7, "each rewrite is recorded: %s", strings.Join(r.log, "\n"))
}

// A claim's directory under this machine's /tmp is not then read as the container's /tmp: the
// gateway's store would have been a missing folder in its own scratch space.
func TestRewriterRewritesEachMountOnce(t *testing.T) {
	r := newRewriter("polyaxon", nil, nil, map[string]string{"/plx-artifacts": "/tmp/TestRun/001", "/tmp": "/pods/gw/volumes/tmp"})
	env, err := r.apply([]EnvVar{{"STORE", `{"mountPath":"/plx-artifacts"}`}, {"ARCHIVES", "/tmp/plx/archives"}})
	require.NoError(t, err)
	got := envMap(env)
	assert.Equal(t, `{"mountPath":"/tmp/TestRun/001"}`, got["STORE"])
	assert.Equal(t, "/pods/gw/volumes/tmp/plx/archives", got["ARCHIVES"])
}

func TestCRILogWriter(t *testing.T) {
	var buf bytes.Buffer
	out, errw := newCRILogWriters(&buf)
	now := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	out.now, errw.now = func() time.Time { return now }, func() time.Time { return now }
	_, _ = out.Write([]byte("one\ntw"))
	_, _ = errw.Write([]byte("err\n"))
	_, _ = out.Write([]byte("o\nthree"))
	require.NoError(t, out.Flush())
	assert.Equal(t, "2026-01-02T03:04:05.000000006Z stdout F one\n"+
		"2026-01-02T03:04:05.000000006Z stderr F err\n"+
		"2026-01-02T03:04:05.000000006Z stdout F two\n"+
		"2026-01-02T03:04:05.000000006Z stdout F three\n", buf.String())
	assert.Equal(t, "one\nerr\ntwo\nthree\n", criText(buf.String()), "the text, as kubectl logs prints it")
	assert.Equal(t, "a long line\n", criText("t stdout P a long\nt stdout F  line\n"), "a partial record continues")
}

func TestImageRepository(t *testing.T) {
	for in, want := range map[string]string{
		"polyaxon/polyaxon-api:2.15.1":                 "polyaxon/polyaxon-api",
		"registry.example.com:5000/polyaxon/agent:1":   "registry.example.com:5000/polyaxon/agent",
		"registry.example.com:5000/polyaxon/agent":     "registry.example.com:5000/polyaxon/agent",
		"polyaxon/polyaxon-api@sha256:abc":             "polyaxon/polyaxon-api",
		"polyaxon/polyaxon-api:2.15.1@sha256:abcdef12": "polyaxon/polyaxon-api",
	} {
		assert.Equal(t, want, imageRepository(in), in)
	}
}

func TestKillProcessesUnderADirectory(t *testing.T) {
	dir := t.TempDir()
	inside := &HostProcess{Path: "/bin/sleep", Args: []string{"60"}, Dir: dir, LogPath: dir + "/sleep.log"}
	outside := &HostProcess{Path: "/bin/sleep", Args: []string{"60"}, Dir: t.TempDir(), LogPath: t.TempDir() + "/sleep.log"}
	require.NoError(t, inside.Start())
	require.NoError(t, outside.Start())
	t.Cleanup(func() { outside.Stop(time.Second) })
	killed := killProcessesUnder(dir)
	assert.Equal(t, []int{inside.Pid()}, killed)
	select {
	case <-inside.Done():
		assert.Equal(t, 128+9, inside.ExitCode(), "killed by SIGKILL")
	case <-time.After(5 * time.Second):
		t.Fatal("the process under the directory still runs")
	}
	select {
	case <-outside.Done():
		t.Fatal("a process elsewhere was killed")
	default:
	}
}

// A deleted pod's container with a preStop sleep still runs through the sleep, as the kubelet
// keeps it (the Service drops the pod meanwhile), and gets SIGTERM after it.
func TestTerminateSleepsThroughPreStopFirst(t *testing.T) {
	dir := t.TempDir()
	p := &HostProcess{Path: "/bin/sh", Args: []string{"-c", `trap 'echo term; exit 0' TERM; while :; do sleep 0.1; done`},
		Dir: dir, LogPath: dir + "/sh.log", PreStop: 2 * time.Second}
	require.NoError(t, p.Start())
	stopped := make(chan struct{})
	go func() { defer close(stopped); p.Terminate(10 * time.Second) }()
	select {
	case <-p.Done():
		t.Fatal("the process ended during its preStop sleep")
	case <-time.After(time.Second):
	}
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("Terminate did not return")
	}
	assert.Equal(t, 0, p.ExitCode(), "the process ended by its own SIGTERM handler, not SIGKILL")
	out, err := os.ReadFile(dir + "/sh.log")
	require.NoError(t, err)
	assert.Contains(t, string(out), "term")
}

// The venv of a Polyaxon pod follows its image's tag: an upgrade's new pods run the new version.
func TestProgramContainerTag(t *testing.T) {
	for image, tag := range map[string]string{
		"polyaxon/polyaxon-api:2.18.0":                           "2.18.0",
		"registry.example.com:5000/polyaxon/polyaxon-api:2.15.1": "2.15.1",
		"polyaxon/polyaxon-api":                                  "",
		"polyaxon/polyaxon-api:2.18.0@sha256:0123":               "2.18.0",
		"registry.example.com:5000/polyaxon/polyaxon-api":        "",
	} {
		assert.Equal(t, tag, ProgramContainer{Image: image}.Tag(), image)
	}
}
