package release

import (
	"strings"
	"testing"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/values"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const oldManifest = `---
# Source: polyaxon/templates/gateway/deployment.yaml
apiVersion: apps/v1
kind: Deployment
metadata:
  name: polyaxon-gateway
  labels:
    helm.sh/chart: polyaxon-2.0.0
    app.kubernetes.io/version: "2.15.0"
spec:
  replicas: 2
  template:
    metadata:
      labels:
        app.kubernetes.io/version: "2.15.0"
    spec:
      initContainers:
        - name: wait-db
          image: busybox:1.36
      containers:
        - name: gateway
          image: polyaxon/polyaxon-api:2.15.0
---
# Source: polyaxon/templates/agent/configmap.yaml
apiVersion: v1
kind: ConfigMap
metadata:
  name: polyaxon-agent
  labels:
    helm.sh/chart: polyaxon-2.0.0
data:
  A: "1"
---
# Source: polyaxon/templates/redis/service.yaml
apiVersion: v1
kind: Service
metadata:
  name: polyaxon-redis
  labels:
    helm.sh/chart: polyaxon-2.0.0
`

const newManifest = `---
# Source: polyaxon/templates/gateway/deployment.yaml
apiVersion: apps/v1
kind: Deployment
metadata:
  name: polyaxon-gateway
  labels:
    helm.sh/chart: polyaxon-2.1.0
    app.kubernetes.io/version: "2.16.0"
spec:
  replicas: 2
  template:
    metadata:
      labels:
        app.kubernetes.io/version: "2.16.0"
    spec:
      initContainers:
        - name: wait-db
          image: busybox:1.36
      containers:
        - name: gateway
          image: polyaxon/polyaxon-api:2.16.0
---
# Source: polyaxon/templates/agent/configmap.yaml
apiVersion: v1
kind: ConfigMap
metadata:
  name: polyaxon-agent
  labels:
    helm.sh/chart: polyaxon-2.1.0
data:
  A: "1"
---
# Source: polyaxon/templates/migrations/pdb.yaml
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: polyaxon-gateway
`

func TestDiffManifests(t *testing.T) {
	d, err := DiffManifests(oldManifest, newManifest)
	require.NoError(t, err)
	assert.Equal(t, []string{"PodDisruptionBudget/polyaxon-gateway"}, d.Added)
	assert.Equal(t, []string{"Service/polyaxon-redis"}, d.Removed)
	// The ConfigMap only changed its chart label: not a change.
	assert.Equal(t, []string{"Deployment/polyaxon-gateway"}, d.Changed)
	assert.Equal(t, []ImageChange{{Object: "Deployment/polyaxon-gateway", Container: "gateway",
		Old: "polyaxon/polyaxon-api:2.15.0", New: "polyaxon/polyaxon-api:2.16.0"}}, d.Images)
	s := d.String()
	assert.Contains(t, s, "+ PodDisruptionBudget/polyaxon-gateway")
	assert.Contains(t, s, "- Service/polyaxon-redis")
	assert.Contains(t, s, "~ Deployment/polyaxon-gateway")
	assert.Contains(t, s, "polyaxon/polyaxon-api:2.15.0 -> polyaxon/polyaxon-api:2.16.0")

	same, err := DiffManifests(oldManifest, oldManifest)
	require.NoError(t, err)
	assert.True(t, same.Empty())
	assert.Equal(t, "no changes to the release's objects\n", same.String())
}

func TestDiffCronJobImagesAndBadYAML(t *testing.T) {
	cron := func(tag string) string {
		return strings.ReplaceAll(`apiVersion: batch/v1
kind: CronJob
metadata: {name: cleanup}
spec:
  jobTemplate:
    spec:
      template:
        spec:
          containers: [{name: c, image: "x:TAG"}]
`, "TAG", tag)
	}
	d, err := DiffManifests(cron("1"), cron("2"))
	require.NoError(t, err)
	require.Len(t, d.Images, 1)
	assert.Equal(t, "x:1", d.Images[0].Old)

	_, err = DiffManifests("kind: [", "")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "current release manifest")
}

func TestInputsLayer(t *testing.T) {
	stored := Inputs{Profile: "production", ValuesFiles: []values.File{{Name: "a.yaml", Content: "x: 1"}}, Set: []string{"a=1"}}
	got := stored.Layer(Inputs{Set: []string{"a=2"}}, false)
	assert.Equal(t, Inputs{Profile: "production", ValuesFiles: stored.ValuesFiles, Set: []string{"a=1", "a=2"}}, got)
	got = stored.Layer(Inputs{Profile: "development", ValuesFiles: []values.File{{Name: "b.yaml"}}}, true)
	assert.Equal(t, Inputs{Profile: "development", ValuesFiles: []values.File{{Name: "b.yaml"}}}, got)
	assert.Len(t, stored.Set, 1, "Layer must not alias the stored slices")
}

func TestPruneInputs(t *testing.T) {
	data := map[string][]byte{"other": []byte("x")}
	for i := 1; i <= 12; i++ {
		data[inputsKey(i)] = []byte("{}")
	}
	pruneInputs(data, 12, 10)
	_, ok1 := data[inputsKey(1)]
	_, ok2 := data[inputsKey(2)]
	_, ok3 := data[inputsKey(3)]
	assert.False(t, ok1)
	assert.False(t, ok2)
	assert.True(t, ok3)
	assert.Contains(t, data, "other")

	big := map[string][]byte{inputsKey(1): make([]byte, 600<<10), inputsKey(2): make([]byte, 600<<10)}
	pruneInputs(big, 2, 10)
	assert.NotContains(t, big, inputsKey(1), "oldest dropped to fit the Secret")
	assert.Contains(t, big, inputsKey(2), "the entry just written is kept")
}
