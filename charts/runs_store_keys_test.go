package charts_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/admission"
)

// The pods of testdata/storepods are what Polyaxon 2.18.0's own converter
// (polyaxon._k8s.executor.base.BaseExecutor.convert, as the agent calls it) builds for a run of
// project vision, uuid 0123456789abcdef0123456789abcdef, with the artifacts store in bucket
// s3://polyaxon-artifacts and its keys in Secret polyaxon-s3, from polyaxonfiles that differ in
// one field each. Polyaxon gives the keys (envFrom) to its init containers that fetch
// artifacts and to its sidecar, keeps the image, command and env a polyaxonfile sets on those
// init containers, writes the paths it is given into a shell script unquoted, and gives the
// keys to the run's own container when the polyaxonfile names the store.
const storePodsRun = "0123456789abcdef0123456789abcdef"

func storePod(t *testing.T, name string) *corev1.Pod {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "storepods", name+".json"))
	require.NoError(t, err)
	var pod corev1.Pod
	require.NoError(t, json.Unmarshal(raw, &pod), name)
	pod.Namespace = testRunsNamespace
	pod.Name = "plx-operation-" + storePodsRun
	return &pod
}

func bucketStoreValues(extra map[string]any) map[string]any {
	runs := map[string]any{}
	for k, v := range extra {
		runs[k] = v
	}
	return map[string]any{
		"artifactsStore": map[string]any{"kind": "s3", "bucket": "s3://polyaxon-artifacts", "secret": map[string]any{"name": "polyaxon-s3"}},
		"runs":           runs,
	}
}

// Issue 56: a run of one project reads no other's artifacts from the bucket. The store's keys
// reach only Polyaxon's own init container, fetching the run's own artifacts, and its sidecar;
// every way a polyaxonfile has to get them into code of its own is refused, with the fix.
func TestBucketKeysReachOnlyPolyaxonsOwnContainers(t *testing.T) {
	ev := admitter(t, render(t, profileValues(t, "production"), bucketStoreValues(nil)))
	ctx := context.Background()
	admit := func(name string) error {
		_, err := ev.AdmitPod(ctx, storePod(t, name))
		return err
	}
	for _, name := range []string{"plain", "init-own", "user-sidecar", "init-git"} {
		assert.NoError(t, admit(name), "%s: Polyaxon's own init container and sidecar get the keys, as Polyaxon builds them", name)
	}
	// The sidecar holds the keys and uploads what the run leaves in its context: the API
	// server gives it the guarded command (files/sidecar-guard.py), with Polyaxon's arguments.
	admitted, err := ev.AdmitPod(ctx, storePod(t, "plain"))
	require.NoError(t, err)
	sidecar := nativeSidecar(t, admitted)
	require.Len(t, sidecar.Command, 3)
	assert.Equal(t, []string{"python", "-c"}, sidecar.Command[:2])
	assert.Contains(t, sidecar.Command[2], "every open, for reading or writing, walks the path one", "store-guard.py: no link is followed")
	assert.Contains(t, sidecar.Command[2], "must fall in this run's own folder", "sidecar-guard.py")
	assert.Equal(t, storePod(t, "plain").Spec.Containers[1].Args, sidecar.Args)
	// A sidecar the policy did not guard (another image in its place) is refused.
	unguarded := storePod(t, "plain")
	unguarded.Spec.Containers[1].Image = "polyaxon/polyaxon-sidecar:2.17.0"
	_, err = ev.AdmitPod(ctx, unguarded)
	assert.ErrorContains(t, err, "container polyaxon-sidecar (polyaxon/polyaxon-sidecar:2.17.0) is the run's own")

	// As the API server creates it: the ServiceAccount admission plugin mounts the token.
	pod := storePod(t, "plain")
	exp := int64(3607)
	pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: "kube-api-access-x", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
		{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{ExpirationSeconds: &exp, Path: "token"}},
		{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"}}}}}}})
	for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			cs[i].VolumeMounts = append(cs[i].VolumeMounts, corev1.VolumeMount{Name: "kube-api-access-x", MountPath: "/var/run/secrets/kubernetes.io/serviceaccount", ReadOnly: true})
		}
	}
	_, err = ev.AdmitPod(ctx, pod)
	assert.NoError(t, err, "the runs ServiceAccount's token, mounted by the API server")

	const fix = "remove `connections: [artifacts]`, plugins.mountArtifactsStore and plugins.collectArtifacts: false from the polyaxonfile"
	const initFetching = "(polyaxon/polyaxon-init:2.18.0) fetches more than this run's own artifacts, or with a command, variable or mount of the polyaxonfile's"
	refused := map[string][2]string{
		// The run's own container, given the keys by Polyaxon.
		"connections": {"container polyaxon-main", "(python:3.11) is the run's own"},
		"mount-store": {"container polyaxon-main", "(python:3.11) is the run's own"},
		"no-collect":  {"container polyaxon-main", "(python:3.11) is the run's own"},
		// Polyaxon's init container, running what the polyaxonfile says: its own image and
		// command, a variable of its own, a path that is a shell command.
		"init-container-override": {"init container polyaxon-init-artifacts-artifacts-", "(busybox) is not Polyaxon's init container"},
		"init-env":                {"init container polyaxon-init-artifacts-artifacts-", initFetching},
		"init-injection":          {"init container polyaxon-init-artifacts-artifacts-", initFetching},
		// Another run's artifacts: of any project, since the bucket keeps runs by uuid.
		"init-dirs":   {"init container polyaxon-init-artifacts-artifacts-", initFetching},
		"init-dotdot": {"init container polyaxon-init-artifacts-artifacts-", initFetching},
		"init-paths":  {"init container polyaxon-init-artifacts-artifacts-", initFetching},
		"tensorboard": {"init container polyaxon-init-tb-", initFetching},
	}
	for name, want := range refused {
		err := admit(name)
		require.Error(t, err, name)
		assert.True(t, admission.IsRefusal(err), "%s: %v", name, err)
		assert.Contains(t, err.Error(), "the artifacts store's keys (Secret polyaxon-s3) reach only Polyaxon's own init container", name)
		assert.Contains(t, err.Error(), want[0], name)
		assert.Contains(t, err.Error(), want[1], name)
		assert.Contains(t, err.Error(), fix, name)
	}

	// What else a polyaxonfile could change on Polyaxon's own containers.
	changes := map[string]func(*corev1.Pod){
		"a hook on the sidecar": func(p *corev1.Pod) {
			p.Spec.Containers[1].Lifecycle = &corev1.Lifecycle{PostStart: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"sh", "-c", "env"}}}}
		},
		"a probe on the init container": func(p *corev1.Pod) {
			p.Spec.InitContainers[0].StartupProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"sh", "-c", "env"}}}}
		},
		"a mount over the init container's programs": func(p *corev1.Pod) {
			p.Spec.InitContainers[0].VolumeMounts = append(p.Spec.InitContainers[0].VolumeMounts, corev1.VolumeMount{Name: "artifacts-context", MountPath: "/usr/local/lib/python3.11/site-packages/polyaxon"})
		},
		"a working directory of its choosing":    func(p *corev1.Pod) { p.Spec.InitContainers[0].WorkingDir = "/plx-context/artifacts" },
		"another command in the sidecar's image": func(p *corev1.Pod) { p.Spec.Containers[1].Command = []string{"sh", "-c", "env"} },
		"an init container that only looks like Polyaxon's": func(p *corev1.Pod) {
			p.Spec.InitContainers[0].Name = "init-mine"
		},
		"a variable of its own on the sidecar": func(p *corev1.Pod) {
			p.Spec.Containers[1].Env = append(p.Spec.Containers[1].Env, corev1.EnvVar{Name: "LD_PRELOAD", Value: "/plx-context/artifacts/x.so"})
		},
		"the sidecar of another run": func(p *corev1.Pod) {
			for i, e := range p.Spec.Containers[1].Env {
				if e.Name == "POLYAXON_RUN_INSTANCE" {
					p.Spec.Containers[1].Env[i].Value = "default.vision.runs.fedcba9876543210fedcba9876543210"
				}
			}
		},
		"the keys as a mounted Secret in the run's container": func(p *corev1.Pod) {
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "keys", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "polyaxon-s3"}}})
			p.Spec.Containers[0].VolumeMounts = append(p.Spec.Containers[0].VolumeMounts, corev1.VolumeMount{Name: "keys", MountPath: "/keys"})
		},
		"a pod of no run": func(p *corev1.Pod) { delete(p.Labels, "app.kubernetes.io/instance") },
	}
	for name, change := range changes {
		pod := storePod(t, "plain")
		require.Equal(t, "polyaxon-sidecar", pod.Spec.Containers[1].Name)
		change(pod)
		_, err := ev.AdmitPod(ctx, pod)
		require.Error(t, err, name)
		assert.Contains(t, err.Error(), "the artifacts store's keys (Secret polyaxon-s3) reach only", name)
	}

	// runs.artifactsOfOtherRuns: other runs' artifacts and tensorboards, still in Polyaxon's
	// own shape; the run's own container still gets no keys.
	open := admitter(t, render(t, profileValues(t, "production"), bucketStoreValues(map[string]any{"artifactsOfOtherRuns": true})))
	for _, name := range []string{"init-dirs", "tensorboard", "plain"} {
		_, err := open.AdmitPod(ctx, storePod(t, name))
		assert.NoError(t, err, name)
	}
	for _, name := range []string{"connections", "init-injection", "init-dotdot", "init-container-override", "init-paths"} {
		_, err := open.AdmitPod(ctx, storePod(t, name))
		assert.Error(t, err, name)
	}
}

// The guard follows the store: a GCS key file mounted where artifactsStore.secret.mountPath
// says is Polyaxon's, and a store that is no bucket renders no guard at all.
func TestBucketKeysGuardFollowsTheStore(t *testing.T) {
	r := render(t, profileValues(t, "production"))
	for _, p := range r.byKind("ValidatingAdmissionPolicy") {
		assert.NotContains(t, objectText(t, p), "storeLeaks", "a claim store has no keys")
	}
	r = render(t, profileValues(t, "production"), bucketStoreValues(nil))
	policies := r.byKind("ValidatingAdmissionPolicy")
	require.Len(t, policies, 2)
	for _, p := range policies {
		assert.Contains(t, objectText(t, p), "variables.storeLeaks.size() == 0", "both the pods and Polyaxon's objects are judged")
		assert.Contains(t, objectText(t, p), `s3://polyaxon-artifacts`)
	}
}

func objectText(t *testing.T, o interface{ MarshalJSON() ([]byte, error) }) string {
	t.Helper()
	b, err := o.MarshalJSON()
	require.NoError(t, err)
	return string(b)
}

// nativeSidecar is Polyaxon's sidecar of an admitted pod: the runs' mutating policy makes it
// the last init container, restarted Always (a native sidecar, which the kubelet stops with
// SIGTERM once the run's containers ended), and no regular container is left of that name.
func nativeSidecar(t *testing.T, pod *corev1.Pod) corev1.Container {
	t.Helper()
	for _, c := range pod.Spec.Containers {
		require.NotEqual(t, "polyaxon-sidecar", c.Name, "Polyaxon's sidecar is left a regular container")
	}
	require.NotEmpty(t, pod.Spec.InitContainers)
	sidecar := pod.Spec.InitContainers[len(pod.Spec.InitContainers)-1]
	require.Equal(t, "polyaxon-sidecar", sidecar.Name, "the last init container")
	require.NotNil(t, sidecar.RestartPolicy, "a native sidecar")
	require.Equal(t, corev1.ContainerRestartPolicyAlways, *sidecar.RestartPolicy)
	return sidecar
}

// The API server applies the mutating policies in an order it does not define: the sidecar's
// guard, its identity and its move to a native sidecar, the hardening and the placement give
// the same pod whichever runs first.
func TestRunPodMutationsDoNotDependOnPolicyOrder(t *testing.T) {
	ctx := context.Background()
	for store, values := range map[string]map[string]any{"keys": bucketStoreValues(nil), "identity": identityStoreValues(nil)} {
		ev := admitter(t, render(t, profileValues(t, "production"), values))
		for _, name := range []string{"plain", "user-sidecar", "init-own"} {
			pod := storePod(t, name)
			if store == "identity" {
				pod = identityPod(t, name)
			}
			assert.NoError(t, ev.CheckOrderIndependent(ctx, pod), "%s store, pod %s", store, name)
			noInit := pod.DeepCopy()
			noInit.Spec.InitContainers = nil
			assert.NoError(t, ev.CheckOrderIndependent(ctx, noInit), "%s store, pod %s without init containers", store, name)
		}
	}
}
