package plan_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/plan"
)

func compileSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(plan.Schema))
	require.NoError(t, err)
	c := jsonschema.NewCompiler()
	require.NoError(t, c.AddResource("plan.json", doc))
	s, err := c.Compile("plan.json")
	require.NoError(t, err)
	return s
}

// richResult exercises every part of the output: DaemonSet, release pods that fit and not,
// an uncertain pod, category probes, a topology with a missing group, fraction placement.
func richResult(t *testing.T) *plan.Result {
	t.Helper()
	nodes := gpuCluster(5)
	nodes = append(nodes, node("big", 4, 8, 0, map[string]string{"polyaxon": "core"}), node("small", 2, 8, 0, map[string]string{"polyaxon": "core"}))
	objs, err := plan.PodsFromObjects(toObjects(daemonSet("logs", map[string]string{"cpu": "100m"})))
	require.NoError(t, err)
	pods := append(objs, replicas(spec("small", map[string]string{"cpu": "2"}), 1)...)
	pods = append(pods, replicas(spec("big", map[string]string{"cpu": "3900m"}), 1)...)
	topo := loadSeedTopology(t)
	exp := plan.CategoryScheduling{Category: "experiments", NodeSelector: map[string]string{"polyaxon": "gpu-node"}}
	tp, err := topo.Pods("distributed-tf", "polyaxon", exp)
	require.NoError(t, err)
	pods = append(pods, plan.CategoryProbes(plan.RunPlacement{Enforced: true, Categories: []plan.CategoryScheduling{
		exp, {Category: "builds", NodeSelector: map[string]string{"polyaxon": "builds"}},
	}}, "polyaxon")...)
	pods = append(pods, tp...)
	frac, err := plan.ParseTopology([]byte("environment: {placement: {mode: per-gpu}, node_selector: {polyaxon: gpu-node}}"))
	require.NoError(t, err)
	fp, err := frac.Pods("frac", "polyaxon", exp)
	require.NoError(t, err)
	pods = append(pods, fp...)
	return plan.Plan(plan.NewSnapshot(nodes, []corev1.Pod{boundPod("old", "big", map[string]string{"cpu": "100m"})}), pods)
}

func TestJSONOutputMatchesSchema(t *testing.T) {
	s := compileSchema(t)
	res := richResult(t)
	// The scenario really covers the interesting cases.
	assert.NotEmpty(t, res.Categories)
	assert.NotEmpty(t, res.Topologies[0].Missing)
	assert.NotZero(t, res.Summary.Uncertain)
	assert.NotNil(t, res.Pods[0].DaemonSet)

	res.AddCanary([]plan.CanaryResult{{Category: "builds", Pod: "polyaxon-canary-builds-x", Reason: "Unschedulable", Message: "0/9 nodes are available", Seconds: 1.5, Deleted: true}})
	assert.False(t, res.Summary.OK)
	var buf bytes.Buffer
	require.NoError(t, plan.WriteJSON(&buf, res))
	inst, err := jsonschema.UnmarshalJSON(&buf)
	require.NoError(t, err)
	require.NoError(t, s.Validate(inst))

	// An empty plan is valid too.
	buf.Reset()
	require.NoError(t, plan.WriteJSON(&buf, plan.Plan(plan.NewSnapshot(nil, nil), nil)))
	inst, err = jsonschema.UnmarshalJSON(&buf)
	require.NoError(t, err)
	require.NoError(t, s.Validate(inst))

	// The schema can fail: a misspelt field is rejected.
	bad := strings.Replace(mustJSON(t, res), `"assumedFits"`, `"assumedFit"`, 1)
	inst, err = jsonschema.UnmarshalJSON(strings.NewReader(bad))
	require.NoError(t, err)
	assert.Error(t, s.Validate(inst))
}

func mustJSON(t *testing.T, v any) string {
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

// Every field of the Go types has a place in the schema, including omitempty ones a scenario
// may not emit.
func TestSchemaCoversEveryGoField(t *testing.T) {
	var schema map[string]any
	require.NoError(t, json.Unmarshal(plan.Schema, &schema))
	defs := schema["$defs"].(map[string]any)
	props := func(path ...string) map[string]any {
		var cur any = schema
		for _, p := range path {
			cur = cur.(map[string]any)[p]
		}
		return cur.(map[string]any)["properties"].(map[string]any)
	}
	_ = defs
	for typ, path := range map[reflect.Type][]string{
		reflect.TypeOf(plan.Result{}):          nil,
		reflect.TypeOf(plan.ClusterSummary{}):  {"$defs", "cluster"},
		reflect.TypeOf(plan.PoolSummary{}):     {"$defs", "cluster", "properties", "pools", "items"},
		reflect.TypeOf(plan.PodResult{}):       {"$defs", "pod"},
		reflect.TypeOf(plan.DaemonSetResult{}): {"$defs", "pod", "properties", "daemonSet"},
		reflect.TypeOf(plan.PoolCount{}):       {"$defs", "poolCount"},
		reflect.TypeOf(plan.Reason{}):          {"$defs", "reason"},
		reflect.TypeOf(plan.CategoryResult{}):  {"$defs", "category"},
		reflect.TypeOf(plan.TopologyResult{}):  {"$defs", "topology"},
		reflect.TypeOf(plan.ReplicaGroup{}):    {"$defs", "topology", "properties", "groups", "items"},
		reflect.TypeOf(plan.Summary{}):         {"$defs", "summary"},
		reflect.TypeOf(plan.CanaryResult{}):    {"$defs", "canary"},
		reflect.TypeOf(plan.RunsQuota{}):       {"$defs", "runsQuota"},
	} {
		p := props(path...)
		for i := 0; i < typ.NumField(); i++ {
			name := strings.Split(typ.Field(i).Tag.Get("json"), ",")[0]
			if name == "" || name == "-" {
				continue
			}
			assert.Contains(t, p, name, "%s.%s missing from schema.json", typ.Name(), typ.Field(i).Name)
		}
		assert.Len(t, p, countJSONFields(typ), "%s: schema has properties the Go type lacks", typ.Name())
	}
}

func countJSONFields(typ reflect.Type) int {
	n := 0
	for i := 0; i < typ.NumField(); i++ {
		if name := strings.Split(typ.Field(i).Tag.Get("json"), ",")[0]; name != "" && name != "-" {
			n++
		}
	}
	return n
}
