package charts_test

// Issue 53, item 2: a quota for runs. What all runs together may hold (a ResourceQuota), what
// one run container gets and may ask (a LimitRange), and a size on every emptyDir (the runs'
// hardening policy gives one, their restrictions refuse one above its bound).

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/admission"
)

// sizedFromPools is the layer polyaxon-deploy puts between the production profile and the
// user's values on the e2e demo's cluster (installer/plan SizeRunPools): its run pools are two
// experiments nodes (16 CPU, 64Gi, 110 pods, 100Gi of disk, 4 GPUs each) and a builds node
// (8 CPU, 16Gi, 110 pods, 100Gi).
var sizedFromPools = map[string]any{"runs": map[string]any{
	"quota": map[string]any{"pods": "330", "cpu": "40", "memory": "144Gi", "ephemeralStorage": "300Gi",
		"gpus": map[string]any{"nvidia.com/gpu": "8"}},
	"limitRange": map[string]any{"max": map[string]any{"cpu": "16", "memory": "64Gi", "ephemeral-storage": "100Gi"}},
}}

func runsQuota(t *testing.T, r rendered) *corev1.ResourceQuota {
	t.Helper()
	o := r.get("ResourceQuota", testRelease+"-runs")
	require.NotNil(t, o, "the runs' ResourceQuota")
	var q corev1.ResourceQuota
	decodeStrict(t, o, &q)
	assert.Equal(t, testRunsNamespace, q.Namespace)
	return &q
}

func runsLimitRange(t *testing.T, r rendered) *corev1.LimitRange {
	t.Helper()
	o := r.get("LimitRange", testRelease+"-runs")
	require.NotNil(t, o, "the runs' LimitRange")
	var l corev1.LimitRange
	decodeStrict(t, o, &l)
	assert.Equal(t, testRunsNamespace, l.Namespace)
	return &l
}

// quantities reads a ResourceList as text, for comparisons that show what differs.
func quantities(l corev1.ResourceList) map[string]string {
	out := map[string]string{}
	for k, v := range l {
		out[string(k)] = v.String()
	}
	return out
}

// The object counts and the Services no run may open, whatever else the quota holds.
var quotaObjects = map[string]string{
	"count/configmaps": "100", "count/secrets": "100", "count/services": "200", "count/jobs.batch": "500",
	"count/deployments.apps": "200", "count/jobs.polyaxon.com": "500", "count/services.polyaxon.com": "200",
	"count/kfjobs.polyaxon.com": "200", "count/clusters.polyaxon.com": "100",
	"services.loadbalancers": "0", "services.nodeports": "0",
}

func withQuota(extra map[string]string) map[string]string {
	out := map[string]string{}
	for _, m := range []map[string]string{quotaObjects, extra} {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

func TestRunsQuotaAndLimitRangeOfTheProductionProfile(t *testing.T) {
	claims := map[string]string{"persistentvolumeclaims": "50", "requests.storage": "2Ti"}

	// The chart alone (helm template): the profile's static bounds, no totals.
	static := render(t, profileValues(t, "production"))
	assert.Equal(t, withQuota(claims), quantities(runsQuota(t, static).Spec.Hard))
	l := runsLimitRange(t, static)
	require.Len(t, l.Spec.Limits, 2)
	c := l.Spec.Limits[0]
	assert.Equal(t, corev1.LimitTypeContainer, c.Type)
	assert.Equal(t, map[string]string{"cpu": "100m", "memory": "256Mi", "ephemeral-storage": "256Mi"}, quantities(c.DefaultRequest))
	assert.Empty(t, c.Default, "no default limit: the API server gives the max")
	assert.Equal(t, map[string]string{"cpu": "64", "memory": "512Gi", "ephemeral-storage": "1Ti"}, quantities(c.Max))
	assert.Equal(t, corev1.LimitTypePersistentVolumeClaim, l.Spec.Limits[1].Type)
	assert.Equal(t, map[string]string{"storage": "1Ti"}, quantities(l.Spec.Limits[1].Max))

	// Sized from the pools: each total bounds the requests (limits only through hard).
	sized := render(t, profileValues(t, "production"), sizedFromPools)
	assert.Equal(t, withQuota(map[string]string{
		"persistentvolumeclaims": "50", "requests.storage": "2Ti", "pods": "330",
		"requests.cpu": "40", "requests.memory": "144Gi",
		"requests.ephemeral-storage": "300Gi", "requests.nvidia.com/gpu": "8",
	}), quantities(runsQuota(t, sized).Spec.Hard))
	assert.Equal(t, map[string]string{"cpu": "16", "memory": "64Gi", "ephemeral-storage": "100Gi"}, quantities(runsLimitRange(t, sized).Spec.Limits[0].Max))

	// The user's values win key by key: a total, a key of hard over a total, a count dropped,
	// numbers as YAML and --set give them.
	mine := render(t, profileValues(t, "production"), sizedFromPools, yamlValues(t, `runs:
  quota:
    memory: 100Gi
    pods: 1000000
    objects: {configmaps: null, secrets: 20}
    hard: {limits.cpu: 160, requests.amd.com/gpu: "2"}
  limitRange: {max: {cpu: 8}}`))
	hard := quantities(runsQuota(t, mine).Spec.Hard)
	assert.Equal(t, "100Gi", hard["requests.memory"])
	assert.NotContains(t, hard, "limits.memory", "a total bounds requests only")
	assert.Equal(t, "1M", hard["pods"], "a number of pods, not 1e+06")
	assert.Equal(t, "40", hard["requests.cpu"])
	assert.Equal(t, "160", hard["limits.cpu"], "runs.quota.hard wins over the total")
	assert.Equal(t, "2", hard["requests.amd.com/gpu"])
	assert.Equal(t, "8", hard["requests.nvidia.com/gpu"])
	assert.NotContains(t, hard, "count/configmaps", "null drops a count")
	assert.Equal(t, "20", hard["count/secrets"])
	assert.Equal(t, map[string]string{"cpu": "8", "memory": "64Gi", "ephemeral-storage": "100Gi"}, quantities(runsLimitRange(t, mine).Spec.Limits[0].Max))

	// Runs in the release's namespace (development, the chart's default): no quota, no limits:
	// they would bound the platform.
	for _, r := range []rendered{render(t, profileValues(t, "development")), render(t)} {
		assert.Empty(t, r.byKind("ResourceQuota"))
		assert.Empty(t, r.byKind("LimitRange"))
	}
	// A namespace of their own without any value set: the quota still keeps Services closed.
	own := render(t, map[string]any{"runs": map[string]any{"namespace": testRunsNamespace}})
	assert.Equal(t, quotaObjects, quantities(runsQuota(t, own).Spec.Hard))
	assert.Empty(t, own.byKind("LimitRange"), "nothing to give a container")
}

// Values that cannot work are refused by the render, with the value's path and the fix.
func TestRunsQuotaRefusedAtRender(t *testing.T) {
	prod := profileValues(t, "production")
	cases := []struct {
		name string
		vals string
		want []string
	}{
		{"a LoadBalancer for a run", `runs: {quota: {hard: {services.loadbalancers: "1"}}}`,
			[]string{"runs.quota.hard.services.loadbalancers is 1", "cloud load balancer", "remove services.loadbalancers from runs.quota.hard"}},
		{"a NodePort for a run", `runs: {quota: {hard: {services.nodeports: 3}}}`,
			[]string{"runs.quota.hard.services.nodeports is 3", "port on every node", "remove services.nodeports from runs.quota.hard"}},
		{"a default limit above max", `runs: {limitRange: {default: {memory: 1Ti}}}`,
			[]string{"runs.limitRange.default.memory 1Ti is above runs.limitRange.max.memory 512Gi", "lower runs.limitRange.default.memory, or raise runs.limitRange.max.memory"}},
		{"a default limit above a max sized from the pools", `runs: {limitRange: {default: {cpu: "1"}, max: {cpu: 500m}}}`,
			[]string{"runs.limitRange.default.cpu 1 is above runs.limitRange.max.cpu 500m", "lower runs.limitRange.default.cpu"}},
		{"a default request above max", `runs: {limitRange: {defaultRequest: {ephemeral-storage: 2Ti}}}`,
			[]string{"runs.limitRange.defaultRequest.ephemeral-storage 2Ti is above runs.limitRange.max.ephemeral-storage 1Ti"}},
		{"a default request above the default limit", `runs: {limitRange: {defaultRequest: {cpu: 1500m}, default: {cpu: "1"}}}`,
			[]string{"runs.limitRange.defaultRequest.cpu 1500m is above runs.limitRange.default.cpu 1", "raise runs.limitRange.default.cpu"}},
		{"a CPU quota without a default limit", `runs: {quota: {hard: {limits.cpu: 8}}, limitRange: {max: {cpu: null}}}`,
			[]string{"bounds limits.cpu (runs.quota)", "set runs.limitRange.default.cpu"}},
		{"a memory quota without a default request", `runs: {quota: {hard: {requests.memory: 8Gi}}, limitRange: {defaultRequest: {memory: null}, max: {memory: null}}}`,
			[]string{"bounds requests.memory (runs.quota)", "set runs.limitRange.defaultRequest.memory"}},
		{"an emptyDir default above its bound", `runs: {emptyDir: {sizeLimit: 200Gi}}`,
			[]string{"runs.emptyDir.sizeLimit is 200Gi, above runs.emptyDir.maxSizeLimit 100Gi", "lower runs.emptyDir.sizeLimit, or raise runs.emptyDir.maxSizeLimit"}},
		{"an shm default above its bound", `runs: {emptyDir: {memorySizeLimit: 32Gi}}`,
			[]string{"runs.emptyDir.memorySizeLimit is 32Gi, above runs.emptyDir.maxMemorySizeLimit 16Gi"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			vals := yamlValues(t, tc.vals)
			require.NoError(t, validateValues(t, prod, vals), "the schema accepts these; the chart must refuse them")
			_, err := renderWith(loadChart(t), mergeValues(prod, vals), false, nil)
			require.Error(t, err, "values rendered:\n%s", tc.vals)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
	// Zero is what the chart renders anyway; no bound at all is fine too.
	for _, ok := range []string{`runs: {quota: {hard: {services.nodeports: "0"}}}`, `runs: {emptyDir: {maxSizeLimit: "", maxMemorySizeLimit: ""}}`} {
		_, err := renderWith(loadChart(t), mergeValues(prod, yamlValues(t, ok)), false, nil)
		assert.NoError(t, err, ok)
	}
	// The schema refuses what is no quantity, with the path.
	err := validateValues(t, yamlValues(t, `runs: {quota: {cpu: lots}}`))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "'/runs/quota/cpu'")
	err = validateValues(t, yamlValues(t, `runs: {emptyDir: {sizeLimit: 10 Gi}}`))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "'/runs/emptyDir/sizeLimit'")
}

// volumeSizes are the pod's emptyDirs by name, with their size ("" when none).
func volumeSizes(p *corev1.Pod) map[string]string {
	out := map[string]string{}
	for _, v := range p.Spec.Volumes {
		if v.EmptyDir == nil {
			continue
		}
		out[v.Name] = ""
		if v.EmptyDir.SizeLimit != nil {
			out[v.Name] = v.EmptyDir.SizeLimit.String()
		}
	}
	return out
}

func emptyDir(name string, medium corev1.StorageMedium, size string) corev1.Volume {
	v := corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: medium}}}
	if size != "" {
		q := resource.MustParse(size)
		v.EmptyDir.SizeLimit = &q
	}
	return v
}

// Polyaxon sizes none of its emptyDirs (its /dev/shm in memory among them): the hardening
// policy gives each a size, a run's own size is kept, and one above its bound is refused with
// the volume, its size, the bound and the value that sets it.
func TestRunEmptyDirsAreSized(t *testing.T) {
	ev := admitter(t, render(t, profileValues(t, "production")))
	ctx := context.Background()
	for _, f := range append(runPodFixtures, "own-node-selector.yaml") {
		pod := runPod(t, f)
		pod.Spec.Volumes = append(pod.Spec.Volumes, emptyDir("shm", corev1.StorageMediumMemory, ""))
		got, err := ev.AdmitPod(ctx, pod)
		require.NoError(t, err, "%s with Polyaxon's shm volume is admitted", f)
		sizes := volumeSizes(got)
		assert.Equal(t, "8Gi", sizes["shm"], "%s: the shm volume gets runs.emptyDir.memorySizeLimit", f)
		for name, size := range sizes {
			if name != "shm" {
				assert.Equal(t, "50Gi", size, "%s: volume %s gets runs.emptyDir.sizeLimit", f, name)
			}
		}
	}

	pod := runPod(t, "job.yaml")
	pod.Spec.Volumes = append(pod.Spec.Volumes, emptyDir("scratch", "", "50Gi"), emptyDir("huge-pages", corev1.StorageMediumHugePages, ""))
	got, err := ev.AdmitPod(ctx, pod)
	require.NoError(t, err, "a run's own size within the bound")
	assert.Equal(t, "50Gi", volumeSizes(got)["scratch"], "the run's own size is kept")
	assert.Equal(t, "", volumeSizes(got)["huge-pages"], "a hugepages emptyDir is sized by its hugepages request")

	const denied = "ValidatingAdmissionPolicy '" + restrictionsPolicy + "' with binding '" + restrictionsPolicy + "' denied request: "
	for _, c := range []podChange{
		{"a disk emptyDir above its bound", func(p *corev1.Pod) { p.Spec.Volumes = append(p.Spec.Volumes, emptyDir("scratch", "", "200Gi")) },
			denied + "spec.volumes: volume scratch asks 200Gi of the node's disk, above 100Gi (chart value runs.emptyDir.maxSizeLimit): a run's emptyDir may not ask for more: lower its sizeLimit in the run's environment (volumes), or raise that chart value"},
		{"an shm above its bound", func(p *corev1.Pod) {
			p.Spec.Volumes = append(p.Spec.Volumes, emptyDir("shm", corev1.StorageMediumMemory, "32Gi"), emptyDir("cache", "", "101Gi"))
		}, denied + "spec.volumes: volume shm asks 32Gi in memory, above 16Gi (chart value runs.emptyDir.maxMemorySizeLimit); volume cache asks 101Gi of the node's disk, above 100Gi (chart value runs.emptyDir.maxSizeLimit)"},
	} {
		requireRefused(t, ev, c)
	}

	// Without bounds nothing is refused; without sizes nothing is given.
	open := admitter(t, render(t, profileValues(t, "production"), yamlValues(t, `runs: {emptyDir: {sizeLimit: "", memorySizeLimit: "", maxSizeLimit: "", maxMemorySizeLimit: ""}}`)))
	pod = runPod(t, "job.yaml")
	pod.Spec.Volumes = append(pod.Spec.Volumes, emptyDir("shm", corev1.StorageMediumMemory, ""), emptyDir("scratch", "", "5Ti"))
	got, err = open.AdmitPod(ctx, pod)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"artifacts-context": "", "configs-context": "", "shm": "", "scratch": "5Ti"}, volumeSizes(got))
}

// A run that sets only requests, above the LimitRange's default limit (which the API server
// gives before the policies run), gets its request as limit; a request below its limit keeps both.
func TestRunRequestsAboveTheDefaultLimitAreKept(t *testing.T) {
	ev := admitter(t, render(t, profileValues(t, "production")))
	pod := runPod(t, "job.yaml")
	main := &pod.Spec.Containers[0]
	// As the LimitRange left it: the run's own requests, the defaults as limits.
	main.Resources = corev1.ResourceRequirements{
		Requests: corev1.ResourceList{"cpu": resource.MustParse("4"), "memory": resource.MustParse("512Mi"), "ephemeral-storage": resource.MustParse("20Gi")},
		Limits:   corev1.ResourceList{"cpu": resource.MustParse("1"), "memory": resource.MustParse("1Gi"), "ephemeral-storage": resource.MustParse("8Gi")},
	}
	pod.Spec.InitContainers[0].Resources = corev1.ResourceRequirements{
		Requests: corev1.ResourceList{"memory": resource.MustParse("2Gi")}, Limits: corev1.ResourceList{"memory": resource.MustParse("1Gi")}}
	got, err := ev.AdmitPod(context.Background(), pod)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"cpu": "4", "memory": "1Gi", "ephemeral-storage": "20Gi"}, quantities(got.Spec.Containers[0].Resources.Limits))
	assert.Equal(t, map[string]string{"memory": "2Gi"}, quantities(got.Spec.InitContainers[0].Resources.Limits))
	assert.Equal(t, quantities(main.Resources.Requests), quantities(got.Spec.Containers[0].Resources.Requests), "requests untouched")
}

// The run objects' templates are judged too: the agent reports the refusal as the run's
// failed status. Polyaxon's own emptyDirs there have no size (the pods get theirs) and pass.
func TestRunObjectEmptyDirsAreBounded(t *testing.T) {
	ev := admitter(t, render(t, profileValues(t, "production")))
	obj := &unstructured.Unstructured{}
	require.NoError(t, obj.UnmarshalJSON(readFile(t, "../e2e/operator/testdata/job.json")))
	obj.SetNamespace(testRunsNamespace)
	gvr := schema.GroupVersionResource{Group: "polyaxon.com", Version: "v1", Resource: "jobs"}
	require.NoError(t, ev.AdmitObject(context.Background(), obj, gvr))
	spec, ok, err := unstructured.NestedMap(obj.Object, "batchJobSpec", "template", "spec")
	require.NoError(t, err)
	require.True(t, ok)
	vols, _ := spec["volumes"].([]any)
	spec["volumes"] = append(vols, map[string]any{"name": "scratch", "emptyDir": map[string]any{"sizeLimit": "1Ti"}})
	require.NoError(t, unstructured.SetNestedMap(obj.Object, spec, "batchJobSpec", "template", "spec"))
	err = ev.AdmitObject(context.Background(), obj, gvr)
	require.Error(t, err)
	assert.True(t, admission.IsRefusal(err), "%v", err)
	assert.Contains(t, err.Error(), "spec.volumes: volume scratch asks 1Ti of the node's disk, above 100Gi (chart value runs.emptyDir.maxSizeLimit)")
}
