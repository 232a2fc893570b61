package charts_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/chartutil"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"
)

// validateValues runs the check `helm install/upgrade/template` runs before rendering:
// user values coalesced with the chart's defaults, then the chart's values.schema.json.
func validateValues(t *testing.T, layers ...map[string]any) error {
	t.Helper()
	opts := chartutil.ReleaseOptions{Name: testRelease, Namespace: testNamespace, Revision: 1, IsInstall: true}
	_, err := chartutil.ToRenderValues(loadChart(t), mergeValues(layers...), opts, chartutil.DefaultCapabilities.Copy())
	return err
}

func yamlValues(t *testing.T, s string) map[string]any {
	t.Helper()
	out := map[string]any{}
	require.NoError(t, yaml.Unmarshal([]byte(s), &out), "test values:\n%s", s)
	return out
}

func TestSchemaLoadedByHelm(t *testing.T) {
	ch := loadChart(t)
	require.NotEmpty(t, ch.Schema, "charts/polyaxon/values.schema.json was not loaded with the chart")
	var doc map[string]any
	require.NoError(t, json.Unmarshal(ch.Schema, &doc))
	assert.Equal(t, "http://json-schema.org/draft-07/schema#", doc["$schema"])
}

func TestSchemaAcceptsChartDefaults(t *testing.T) {
	ch := loadChart(t)
	// values.yaml as written, then as Helm coalesces it with no user values.
	require.NoError(t, chartutil.ValidateAgainstSchema(ch, ch.Values))
	require.NoError(t, validateValues(t))
}

// The seeds must be accepted as written and render (the full `helm template` path).
func TestSchemaAcceptsSeeds(t *testing.T) {
	for _, name := range []string{"gpu-experiments.yaml", "production-node-pools.yaml"} {
		t.Run(name, func(t *testing.T) {
			vals := readValues(t, seed(name))
			require.NoError(t, validateValues(t, vals))
			_, err := renderWith(loadChart(t), mergeValues(vals), false, nil)
			require.NoError(t, err)
		})
	}
}

func TestSchemaAccepts(t *testing.T) {
	cases := map[string]string{
		"nodeSelector alias keyed by category":   `nodeSelector: {core: {polyaxon: core}, notebooks: {pool: nb}}`,
		"securityContext aliases":                `securityContext: {runAsUser: 1000, runAsGroup: 1000}`,
		"uid 0 when the security context is off": `securityContext: {enabled: false, user: 0, group: 0, fsGroup: 0}`,
		"every toleration field": `
tolerations:
  experiments:
  - {key: nvidia.com/gpu, operator: Equal, value: present, effect: NoExecute, tolerationSeconds: 300}
  - {operator: Exists}`,
		"affinity subset": `
affinity:
  builds:
    nodeAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        nodeSelectorTerms:
        - matchExpressions: [{key: pool, operator: In, values: [builds]}]
      preferredDuringSchedulingIgnoredDuringExecution:
      - weight: 10
        preference: {matchFields: [{key: metadata.name, operator: NotIn, values: [n1]}]}
    podAntiAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
      - topologyKey: kubernetes.io/hostname
        labelSelector: {matchExpressions: [{key: app, operator: Exists}]}
        namespaceSelector: {}
        matchLabelKeys: [pod-template-hash]`,
		"dependency scheduling": `
postgresql: {nodeSelector: {disk: ssd}, tolerations: [{key: key1, operator: Exists, effect: NoSchedule}], affinity: {nodeAffinity: {}}}
redis: {nodeSelector: {disk: ssd}}`,
		"env var shapes": `
gateway:
  extraEnv:
  - {name: A, value: "1"}
  - name: B
    valueFrom: {secretKeyRef: {name: s, key: k, optional: true}}
  - name: C
    valueFrom: {fieldRef: {fieldPath: metadata.name}}
  - name: D
    valueFrom: {resourceFieldRef: {resource: limits.memory, divisor: 1Mi}}`,
		"resources as numbers and quantities": `gateway: {resources: {requests: {cpu: 0.5, memory: 1Gi}, limits: {cpu: 2, memory: 4e9}}}`,
		"null nodePort and minAvailable":      `gateway: {service: {type: NodePort, nodePort: 30080}, pdb: {minAvailable: "50%"}}`,
		"integer image tag":                   `postgresql: {image: {tag: 17}}`,
		"umbrella chart globals":              `global: {imageRegistry: mirror.example.com}`,
	}
	for name, vals := range cases {
		t.Run(name, func(t *testing.T) {
			require.NoError(t, validateValues(t, yamlValues(t, vals)))
		})
	}
}

// Schema errors name the value's path. Helm reports it as a JSON pointer
// (`at '/nodeSelectors/core': got string, want object`); that is what `helm install` prints.
func TestSchemaRejects(t *testing.T) {
	cases := []struct {
		name string
		vals string
		want []string
	}{
		{"category of the wrong type", `nodeSelectors: {core: "x"}`, []string{"'/nodeSelectors/core'", "want object"}},
		{"unknown category", `nodeSelectors: {gpu: {}}`, []string{"'/nodeSelectors'", "'gpu'", "not allowed"}},
		{"unknown category in the alias", `nodeSelector: {gpu: {}}`, []string{"'/nodeSelector'", "'gpu'"}},
		{"unknown tolerations category", `tolerations: {gpus: []}`, []string{"'/tolerations'", "'gpus'"}},
		{"unknown affinity category", `affinity: {training: {}}`, []string{"'/affinity'", "'training'"}},
		{"node label value not a string", `nodeSelectors: {core: {gpu: true}}`, []string{"'/nodeSelectors/core/gpu'", "want string"}},
		{"toleration operator", `tolerations: {core: [{operator: Sometimes}]}`, []string{"'/tolerations/core/0/operator'", "Exists"}},
		{"toleration effect", `tolerations: {core: [{operator: Exists, effect: NoRun}]}`, []string{"'/tolerations/core/0/effect'", "NoSchedule"}},
		{"toleration typo", `tolerations: {jobs: [{key: a, operater: Equal}]}`, []string{"'/tolerations/jobs/0'", "'operater'"}},
		{"tolerations not a list", `tolerations: {core: {operator: Exists}}`, []string{"'/tolerations/core'", "want array"}},
		{"top-level typo", `postgresq: {}`, []string{"'postgresq'", "not allowed"}},
		{"replicas not a number", `gateway: {replicas: "two"}`, []string{"'/gateway/replicas'", "want integer"}},
		{"negative replicas", `worker: {replicas: -1}`, []string{"'/worker/replicas'", "minimum"}},
		{"broker", `broker: kafka`, []string{"'/broker'", "rabbitmq"}},
		{"port out of range", `gateway: {service: {port: 70000}}`, []string{"'/gateway/service/port'", "maximum"}},
		{"external port", `externalServices: {postgresql: {port: "5432"}}`, []string{"'/externalServices/postgresql/port'", "want integer"}},
		{"external typo", `externalServices: {redis: {hots: r}}`, []string{"'/externalServices/redis'", "'hots'"}},
		{"component typo", `scheduler: {replica: 2}`, []string{"'/scheduler'", "'replica'"}},
		{"image typo", `gateway: {image: {repo: x}}`, []string{"'/gateway/image'", "'repo'"}},
		{"lossy float tag", `postgresql: {image: {tag: 16.10}}`, []string{"'/postgresql/image/tag'"}},
		{"pdb minAvailable", `agent: {pdb: {minAvailable: half}}`, []string{"'/agent/pdb/minAvailable'"}},
		{"affinity typo", `affinity: {core: {podAfinity: {}}}`, []string{"'/affinity/core'", "'podAfinity'"}},
		{"affinity weight", `affinity: {jobs: {podAffinity: {preferredDuringSchedulingIgnoredDuringExecution: [{weight: 0, podAffinityTerm: {topologyKey: z}}]}}}`,
			[]string{"'/affinity/jobs/podAffinity/preferredDuringSchedulingIgnoredDuringExecution/0/weight'"}},
		{"affinity term without topologyKey", `gateway: {affinity: {podAntiAffinity: {requiredDuringSchedulingIgnoredDuringExecution: [{labelSelector: {}}]}}}`,
			[]string{"'/gateway/affinity/podAntiAffinity/requiredDuringSchedulingIgnoredDuringExecution/0'", "topologyKey"}},
		{"node selector operator", `affinity: {experiments: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchExpressions: [{key: a, operator: Is}]}]}}}}`,
			[]string{"'/affinity/experiments/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms/0/matchExpressions/0/operator'"}},
		{"dependency tolerations", `postgresql: {tolerations: [{operator: Sometimes}]}`, []string{"'/postgresql/tolerations/0/operator'"}},
		{"dependency node selector", `redis: {nodeSelector: [a]}`, []string{"'/redis/nodeSelector'", "want object"}},
		{"dependency affinity", `rabbitmq: {affinity: {nodeAffinty: {}}}`, []string{"'/rabbitmq/affinity'", "'nodeAffinty'"}},
		{"env value not a string", `worker: {extraEnv: [{name: WORKERS, value: 2}]}`, []string{"'/worker/extraEnv/0/value'", "want string"}},
		{"env without name", `agent: {extraEnv: [{value: x}]}`, []string{"'/agent/extraEnv/0'", "name"}},
		{"quantity", `gateway: {resources: {limits: {memory: 2 Gi}}}`, []string{"'/gateway/resources/limits/memory'"}},
		{"resources typo", `gateway: {resources: {request: {cpu: 1}}}`, []string{"'/gateway/resources'", "'request'"}},
		{"runAsUser alias type", `securityContext: {runAsUser: root}`, []string{"'/securityContext/runAsUser'", "want integer"}},
		{"root with the security context on", `securityContext: {user: 0}`, []string{"'/securityContext/user'", "minimum"}},
		{"security context typo", `securityContext: {fsgroup: 1}`, []string{"'/securityContext'", "'fsgroup'"}},
		{"access mode", `redis: {persistence: {accessModes: [ReadWriteSometimes]}}`, []string{"'/redis/persistence/accessModes/0'"}},
		{"pull policy", `imagePullPolicy: Sometimes`, []string{"'/imagePullPolicy'"}},
		{"pull secrets as objects", `imagePullSecrets: [{name: regcred}]`, []string{"'/imagePullSecrets/0'", "want string"}},
		{"ingress path type", `ingress: {pathType: Regex}`, []string{"'/ingress/pathType'"}},
		{"operators typo", `operators: {tfjobs: true}`, []string{"'/operators'", "'tfjobs'"}},
		{"migrations flag type", `migrations: {useHelmHooks: "yes"}`, []string{"'/migrations/useHelmHooks'", "want boolean"}},
		{"name override with a path", `nameOverride: ../../etc`, []string{"'/nameOverride'", "pattern"}},
		{"full name override upper case", `fullnameOverride: Polyaxon`, []string{"'/fullnameOverride'", "pattern"}},
		{"artifacts store kind", `artifactsStore: {kind: nfs}`, []string{"'/artifactsStore/kind'", "volume_claim"}},
		{"connection without a kind", `connections: [{name: data}]`, []string{"'/connections/0'", "kind"}},
		{"connection kind", `connections: [{name: data, kind: dropbox}]`, []string{"'/connections/0/kind'", "git"}},
		{"log level nginx cannot take", `logLevel: CRITICAL`, []string{"'/logLevel'", "ERROR"}},
		{"a label NetworkPolicies match on", `commonLabels: {app.kubernetes.io/part-of: x}`, []string{"'/commonLabels/app.kubernetes.io~1part-of'", "false schema"}},
		{"a selector label", `commonLabels: {team: ml, app.kubernetes.io/instance: other}`, []string{"'/commonLabels/app.kubernetes.io~1instance'"}},
		{"the core role label", `commonLabels: {polyaxon.com/role: core}`, []string{"'/commonLabels/polyaxon.com~1role'"}},
		{"a label value not a string", `commonLabels: {team: 1}`, []string{"'/commonLabels/team'", "want string"}},
		{"a CIDR without its prefix length", `networkPolicy: {runs: {deniedCIDRs: [10.0.0.1]}}`, []string{"'/networkPolicy/runs/deniedCIDRs/0'", "pattern"}},
		{"runs' network typo", `networkPolicy: {runs: {internets: false}}`, []string{"'/networkPolicy/runs'", "'internets'"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := validateValues(t, yamlValues(t, tc.vals))
			require.Error(t, err, "values accepted:\n%s", tc.vals)
			t.Log(err)
			msg := err.Error()
			assert.Contains(t, msg, "values don't meet the specifications of the schema")
			for _, w := range tc.want {
				assert.Contains(t, msg, w)
			}
		})
	}
}

// An integer tag renders as written (Helm reads YAML numbers as float64; a six-digit bound
// keeps %v out of exponent form), and a quoted one as the string.
func TestImageTagRendering(t *testing.T) {
	for tag, want := range map[string]string{`17`: "postgres:17", `"16.10"`: "postgres:16.10", `999999`: "postgres:999999"} {
		r := render(t, yamlValues(t, fmt.Sprintf("postgresql: {image: {tag: %s}}", tag)))
		obj := r.get("StatefulSet", "polyaxon-postgresql")
		require.NotNil(t, obj)
		var sts appsv1.StatefulSet
		require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &sts))
		assert.Equal(t, want, sts.Spec.Template.Spec.Containers[0].Image, "tag %s", tag)
	}
	require.Error(t, validateValues(t, yamlValues(t, `postgresql: {image: {tag: 1000000}}`)), "7-digit numeric tags render as 1e+06")
}

// Our own maps are closed: every schema object that lists properties forbids others, so a
// typo anywhere is an error rather than a silently ignored value. With the defaults passing
// validation, this also proves the schema describes every key of values.yaml.
func TestSchemaObjectsAreClosed(t *testing.T) {
	var doc map[string]any
	require.NoError(t, json.Unmarshal(loadChart(t).Schema, &doc))
	var open []string
	var walk func(path string, node any)
	walk = func(path string, node any) {
		switch n := node.(type) {
		case map[string]any:
			// if/then fragments are conditions on an object, not objects of their own.
			if _, has := n["properties"]; has && n["type"] == "object" && n["additionalProperties"] != false {
				open = append(open, path)
			}
			for k, v := range n {
				walk(path+"/"+k, v)
			}
		case []any:
			for i, v := range n {
				walk(fmt.Sprintf("%s/%d", path, i), v)
			}
		}
	}
	walk("#", doc)
	sort.Strings(open)
	assert.Empty(t, open, "schema objects with properties but without additionalProperties: false")
}

// Values the schema cannot judge alone are refused when the chart renders, each with its
// values path and the fix, so nothing is applied (plain `helm` included).
func TestRenderRejects(t *testing.T) {
	cases := []struct {
		name string
		vals string
		want []string
	}{
		{"Exists with a value", `tolerations: {core: [{key: a, operator: Exists, value: x}]}`, []string{"tolerations.core[0]", "remove value"}},
		{"Exists with a value on a component", `operator: {tolerations: [{key: a, operator: Exists, value: x}]}`, []string{"operator.tolerations[0]", "operator Equal"}},
		{"tolerationSeconds without NoExecute", `postgresql: {tolerations: [{key: a, operator: Exists, effect: NoSchedule, tolerationSeconds: 30}]}`, []string{"postgresql.tolerations[0]", "NoExecute"}},
		{"tolerationSeconds on a run category", `tolerations: {experiments: [{key: a, operator: Exists, tolerationSeconds: 30}]}`, []string{"tolerations.experiments[0]", "NoExecute"}},
		{"minAvailable over 100%", `gateway: {replicas: 2, pdb: {minAvailable: 150%}}`, []string{"gateway.pdb.minAvailable", "150%"}},
		{"single replica kept by its budget", `gateway: {replicas: 1, pdb: {minAvailable: 1}}`, []string{"gateway.pdb.minAvailable", "drains hang"}},
		{"agent kept by its budget", `agent: {pdb: {minAvailable: 1}}`, []string{"agent.pdb.minAvailable", "maxUnavailable: 1"}},
		{"maxUnavailable zero", `operator: {pdb: {maxUnavailable: 0}}`, []string{"operator.pdb.maxUnavailable", "drains hang"}},
		{"bucket without credentials", `artifactsStore: {kind: s3, bucket: s3://b}`, []string{"artifactsStore.secret.name", "credentials"}},
		{"bucket of another kind", `artifactsStore: {kind: gcs, bucket: s3://b, secret: {name: c}}`, []string{"artifactsStore.bucket", "gs://"}},
		{"host path not absolute", `artifactsStore: {kind: host_path, hostPath: data}`, []string{"artifactsStore.hostPath", "/data"}},
		{"two mounts on one path", `connections: [{name: a, kind: custom, secret: {name: s, mountPath: /etc/secrets}}, {name: b, kind: volume_claim, schema: {volumeClaim: c, mountPath: /etc/secrets}}]`,
			[]string{"connections[1].schema.mountPath", "collides with connections[0].secret.mountPath"}},
		{"a mount inside another", `connections: [{name: a, kind: custom, configMap: {name: m, mountPath: /data}}, {name: b, kind: custom, secret: {name: s, mountPath: /data/keys}}]`,
			[]string{"connections[1].secret.mountPath", "collides"}},
		{"a mount over the store", `connections: [{name: a, kind: custom, secret: {name: s, mountPath: /plx-artifacts}}]`,
			[]string{"connections[0].secret.mountPath", "artifactsStore.mountPath"}},
		{"a mount over Polyaxon's own files", `connections: [{name: a, kind: custom, secret: {name: s, mountPath: /plx-context/x}}]`,
			[]string{"connections[0].secret.mountPath", "/plx-context"}},
		{"two connections with one name", `connections: [{name: a, kind: git}, {name: a, kind: s3}]`, []string{"connections[1].name", "already used"}},
		{"worker without the scheduler", `{redis: {enabled: true}, worker: {enabled: true}}`, []string{"worker.enabled needs scheduler.enabled"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			vals := yamlValues(t, tc.vals)
			require.NoError(t, validateValues(t, vals), "the schema accepts these; the chart must refuse them")
			_, err := renderWith(loadChart(t), mergeValues(vals), false, nil)
			require.Error(t, err, "values rendered:\n%s", tc.vals)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}

// Our seed copies still carry the same settings as the documented configurations, when those
// are beside the checkout (../shared/fixtures/seeds); a clone on its own tests with the copies.
func TestSeedCopiesMatchTheShared(t *testing.T) {
	shared := filepath.Join("..", "..", "shared", "fixtures", "seeds")
	if _, err := os.Stat(shared); err != nil {
		t.Skipf("no shared seed fixtures beside the checkout (%s): the copies in testdata/seeds are the reference", shared)
	}
	ours, err := filepath.Glob(filepath.Join("testdata", "seeds", "*.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, ours)
	for _, f := range ours {
		theirs := filepath.Join(shared, filepath.Base(f))
		if _, err := os.Stat(theirs); err != nil {
			continue
		}
		assert.Equal(t, readValues(t, theirs), readValues(t, f), "%s differs in its settings from %s", f, theirs)
	}
}
