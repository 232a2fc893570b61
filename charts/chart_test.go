package charts_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/action"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/scheme"
	psaapi "k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/contract"
)

// The components, as the chart declares them (files/components.yaml).
var components = contract.EmbeddedComponents()

// podOf is a rendered pod template with the object it came from.
type podOf struct {
	kind, name, component string
	meta                  metav1.ObjectMeta
	spec                  corev1.PodSpec
}

// pods returns every pod template the release would create, strictly decoded.
func (r rendered) pods(t testing.TB) []podOf {
	t.Helper()
	var out []podOf
	for _, o := range r.objects {
		var tpl corev1.PodTemplateSpec
		switch o.GetKind() {
		case "Deployment":
			var d appsv1.Deployment
			decodeStrict(t, o, &d)
			tpl = d.Spec.Template
		case "StatefulSet":
			var s appsv1.StatefulSet
			decodeStrict(t, o, &s)
			tpl = s.Spec.Template
		case "Job":
			var j batchv1.Job
			decodeStrict(t, o, &j)
			tpl = j.Spec.Template
		case "CronJob":
			var j batchv1.CronJob
			decodeStrict(t, o, &j)
			tpl = j.Spec.JobTemplate.Spec.Template
		default:
			continue
		}
		out = append(out, podOf{kind: o.GetKind(), name: o.GetName(), component: o.GetLabels()["app.kubernetes.io/component"], meta: tpl.ObjectMeta, spec: tpl.Spec})
	}
	return out
}

func decodeStrict(t testing.TB, o *unstructured.Unstructured, into any) {
	t.Helper()
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(o.Object, into, true),
		"%s %s does not decode strictly", o.GetKind(), o.GetName())
}

func isCore(component string) bool { return components.IsCore(component) }

// everything turns on every optional component so sweeps see every pod kind, at the oldest
// Polyaxon the chart supports: the last with RabbitMQ (2.17 removed it).
var everything = map[string]any{
	"polyaxon": withRabbitMQ["polyaxon"], "broker": withRabbitMQ["broker"], "rabbitmq": withRabbitMQ["rabbitmq"],
	"redis":     map[string]any{"enabled": true},
	"scheduler": map[string]any{"enabled": true}, "worker": map[string]any{"enabled": true}, "beat": map[string]any{"enabled": true},
	"migrations": map[string]any{"useHelmHooks": true}, "ingress": map[string]any{"enabled": true}, "networkPolicy": map[string]any{"enabled": true},
	"auth": map[string]any{"enabled": true},
	"backup": map[string]any{"schedule": "0 3 * * *", "location": "s3://team-backups/polyaxon",
		"encryptTo": []any{"age1ql3z7hjy54pw3hyww5ayyfg7zqgvc7w3j2elw8zmrj2kg5sfn9aqmcac8p"}},
}

func TestEveryComponentRenders(t *testing.T) {
	r := render(t, everything)
	seen := map[string]bool{}
	for _, p := range r.pods(t) {
		seen[p.component] = true
	}
	for _, c := range append(append([]string{}, components.Core...), components.Dependencies...) {
		assert.True(t, seen[c], "no pod for component %s", c)
	}
	// Celery components need a broker: without one they are not rendered at all.
	r = render(t)
	for _, p := range r.pods(t) {
		assert.NotContains(t, []string{"scheduler", "worker", "beat", "rabbitmq", "redis"}, p.component)
	}
}

func TestEveryObjectDecodesStrictlyAndIsLabelled(t *testing.T) {
	for name, vals := range map[string]map[string]any{"defaults": {}, "everything": everything, "clusterScoped": mergeValues(everything, map[string]any{"rbac": map[string]any{"clusterScoped": true}})} {
		t.Run(name, func(t *testing.T) {
			r := render(t, vals)
			require.NotEmpty(t, r.objects)
			for _, o := range r.objects {
				gvk := o.GroupVersionKind()
				typed, err := scheme.Scheme.New(gvk)
				require.NoError(t, err, "unknown kind %s", gvk)
				decodeStrict(t, o, typed)
				labels := o.GetLabels()
				for _, k := range []string{"app.kubernetes.io/name", "app.kubernetes.io/instance", "app.kubernetes.io/component", "app.kubernetes.io/version", "app.kubernetes.io/managed-by", "helm.sh/chart"} {
					assert.NotEmpty(t, labels[k], "%s %s lacks label %s", o.GetKind(), o.GetName(), k)
				}
			}
		})
	}
}

func TestSelectorsNeverCarryTheVersion(t *testing.T) {
	for _, o := range render(t, everything).objects {
		sel, found, _ := unstructured.NestedStringMap(o.Object, "spec", "selector", "matchLabels")
		if !found {
			continue
		}
		assert.NotContains(t, sel, "app.kubernetes.io/version", "%s %s", o.GetKind(), o.GetName())
		assert.NotContains(t, sel, "helm.sh/chart", "%s %s", o.GetKind(), o.GetName())
	}
}

// Scheduling sweep: every core pod and chart Job gets the core category, dependencies only
// their own keys, and run categories reach the runner's ConfigMap and nowhere else.
func TestSchedulingSweep(t *testing.T) {
	vals := mergeValues(everything, map[string]any{
		"nodeSelectors": map[string]any{"core": map[string]any{"pool": "core"}, "experiments": map[string]any{"pool": "gpu"}, "builds": map[string]any{"pool": "builds"}},
		"tolerations":   map[string]any{"core": []any{map[string]any{"key": "core-only", "operator": "Exists", "effect": "NoSchedule"}}},
		"postgresql":    map[string]any{"nodeSelector": map[string]any{"disk": "ssd"}},
		"agent":         map[string]any{"nodeSelector": map[string]any{"zone": "a"}},
	})
	r := render(t, vals)
	for _, p := range r.pods(t) {
		switch {
		case isCore(p.component):
			assert.Equal(t, "core", p.spec.NodeSelector["pool"], "%s %s", p.kind, p.name)
			require.Len(t, p.spec.Tolerations, 1, "%s %s", p.kind, p.name)
			assert.Equal(t, "core-only", p.spec.Tolerations[0].Key)
			require.NotNil(t, p.spec.Affinity, "%s lost the default core co-location", p.name)
			assert.NotNil(t, p.spec.Affinity.PodAffinity)
		default:
			assert.NotEqual(t, "core", p.spec.NodeSelector["pool"], "dependency %s inherited core scheduling", p.name)
			assert.Empty(t, p.spec.Tolerations, "dependency %s inherited tolerations", p.name)
			assert.Nil(t, p.spec.Affinity, "dependency %s inherited affinity", p.name)
		}
		assert.NotEqual(t, "gpu", p.spec.NodeSelector["pool"], "%s got the experiments selector", p.name)
		// The component override merges key by key and leaks nowhere else.
		if p.component == "agent" {
			assert.Equal(t, map[string]string{"pool": "core", "zone": "a"}, p.spec.NodeSelector)
		} else {
			assert.NotContains(t, p.spec.NodeSelector, "zone", "agent override leaked into %s", p.name)
		}
		if p.component == "postgresql" {
			assert.Equal(t, map[string]string{"disk": "ssd"}, p.spec.NodeSelector)
		}
	}
	runsAt := runPlacement(t, r)
	assert.Equal(t, map[string]string{"pool": "gpu"}, categoryOf(t, runsAt, "experiments").NodeSelector)
	assert.Equal(t, map[string]string{"pool": "builds"}, categoryOf(t, runsAt, "builds").NodeSelector)
	assert.Empty(t, categoryOf(t, runsAt, "jobs").NodeSelector)
	for _, cat := range runsAt.Categories {
		assert.Empty(t, cat.Tolerations, "core tolerations leaked into runs of %s", cat.Category)
		assert.Nil(t, cat.Affinity, "core affinity leaked into runs of %s", cat.Category)
	}
}

func TestComponentTolerationsReplaceTheCategory(t *testing.T) {
	r := render(t, map[string]any{
		"tolerations": map[string]any{"core": []any{map[string]any{"key": "a", "operator": "Exists"}}},
		"operator":    map[string]any{"tolerations": []any{map[string]any{"key": "b", "operator": "Exists"}}},
	})
	for _, p := range r.pods(t) {
		if !isCore(p.component) {
			continue
		}
		want := "a"
		if p.component == "operator" {
			want = "b"
		}
		require.Len(t, p.spec.Tolerations, 1, p.name)
		assert.Equal(t, want, p.spec.Tolerations[0].Key, p.name)
	}
}

func agentConfig(t testing.TB, r rendered) map[string]string {
	t.Helper()
	cm := r.get("ConfigMap", "polyaxon-agent")
	require.NotNil(t, cm, "no runner ConfigMap")
	data, _, _ := unstructured.NestedStringMap(cm.Object, "data")
	return data
}

// The docs' example configurations, as written, on the chart defaults and on each profile.
func TestSeedGPUExperiments(t *testing.T) {
	for _, base := range []string{"", "production", "development"} {
		t.Run("profile="+base, func(t *testing.T) {
			layers := []map[string]any{}
			if base != "" {
				layers = append(layers, profileValues(t, base))
			}
			layers = append(layers, readValues(t, seed("gpu-experiments.yaml")), map[string]any{"migrations": map[string]any{"useHelmHooks": true}})
			r := render(t, layers...)
			assert.Equal(t, "gpu-nodes", categoryOf(t, runPlacement(t, r), "experiments").NodeSelector["polyaxon.com"])
			coreTol := corev1.Toleration{Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}
			pgTol := corev1.Toleration{Key: "key1", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}
			sawJob, sawPG := false, false
			for _, p := range r.pods(t) {
				assert.NotContains(t, p.spec.NodeSelector, "polyaxon.com", "%s got the experiments selector", p.name)
				switch p.component {
				case "postgresql":
					sawPG = true
					assert.Contains(t, p.spec.Tolerations, pgTol)
					assert.NotContains(t, p.spec.Tolerations, coreTol)
				case "rabbitmq", "redis":
					assert.NotContains(t, p.spec.Tolerations, pgTol, p.name)
					assert.NotContains(t, p.spec.Tolerations, coreTol, p.name)
				default:
					require.True(t, isCore(p.component), p.name)
					sawJob = sawJob || p.kind == "Job"
					assert.Contains(t, p.spec.Tolerations, coreTol, "%s %s", p.kind, p.name)
				}
			}
			assert.True(t, sawJob && sawPG, "the seed's assertions must cover a chart Job and Postgres")
		})
	}
}

func TestSeedProductionNodePools(t *testing.T) {
	r := render(t, readValues(t, seed("production-node-pools.yaml")), map[string]any{"migrations": map[string]any{"useHelmHooks": true}})
	for _, p := range r.pods(t) {
		if isCore(p.component) {
			assert.Equal(t, map[string]string{"polyaxon": "core"}, p.spec.NodeSelector, "%s %s", p.kind, p.name)
		}
		require.NotNil(t, p.spec.SecurityContext, p.name)
		id := int64(2222)
		if dataStoreIds[p.component] != 0 {
			id = dataStoreIds[p.component]
		}
		assert.EqualValues(t, id, *p.spec.SecurityContext.RunAsUser, p.name)
		assert.EqualValues(t, id, *p.spec.SecurityContext.RunAsGroup, p.name)
		assert.EqualValues(t, id, *p.spec.SecurityContext.FSGroup, p.name)
	}
	runsAt := runPlacement(t, r)
	for cat, want := range map[string]string{"experiments": "experiments", "jobs": "experiments", "tensorboards": "experiments", "builds": "builds"} {
		assert.Equal(t, map[string]string{"polyaxon": want}, categoryOf(t, runsAt, cat).NodeSelector, cat)
	}
	var def struct {
		NodeSelector map[string]string `json:"nodeSelector"`
	}
	require.NoError(t, json.Unmarshal([]byte(agentConfig(t, r)["POLYAXON_AGENT_DEFAULT_SCHEDULING"]), &def))
	assert.Equal(t, map[string]string{"polyaxon": "experiments"}, def.NodeSelector, "the agent default (Polyaxon's cleaners) comes from jobs")
	assertRestricted(t, r)
}

func TestNodeSelectorAliasAndPluralTogetherFail(t *testing.T) {
	_, err := renderWith(loadChart(t), map[string]any{
		"nodeSelector":  map[string]any{"core": map[string]any{"a": "b"}},
		"nodeSelectors": map[string]any{"core": map[string]any{"c": "d"}},
	}, false, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "`nodeSelector`")
	assert.Contains(t, err.Error(), "`nodeSelectors`")
}

func assertRestricted(t *testing.T, r rendered) {
	t.Helper()
	eval, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	require.NoError(t, err)
	lv := psaapi.LevelVersion{Level: psaapi.LevelRestricted, Version: psaapi.LatestVersion()}
	pods := r.pods(t)
	require.NotEmpty(t, pods)
	for _, p := range pods {
		res := policy.AggregateCheckResults(eval.EvaluatePod(lv, &p.meta, &p.spec))
		assert.True(t, res.Allowed, "%s %s fails the restricted Pod Security Standard: %s", p.kind, p.name, res.ForbiddenDetail())
	}
}

func TestEveryPodPassesRestricted(t *testing.T) {
	cases := map[string][]map[string]any{
		"defaults":    {},
		"everything":  {everything},
		"production":  {profileValues(t, "production"), map[string]any{"migrations": map[string]any{"useHelmHooks": true}}},
		"development": {profileValues(t, "development")},
	}
	for name, layers := range cases {
		t.Run(name, func(t *testing.T) { assertRestricted(t, render(t, layers...)) })
	}
	// The check itself can fail: with the security context off, pods are not restricted.
	r := render(t, map[string]any{"securityContext": map[string]any{"enabled": false}})
	eval, _ := policy.NewEvaluator(policy.DefaultChecks(), nil)
	p := r.pods(t)[0]
	res := policy.AggregateCheckResults(eval.EvaluatePod(psaapi.LevelVersion{Level: psaapi.LevelRestricted, Version: psaapi.LatestVersion()}, &p.meta, &p.spec))
	assert.False(t, res.Allowed)
}

func TestSecurityContextAliases(t *testing.T) {
	r := render(t, map[string]any{"securityContext": map[string]any{"runAsUser": 3000, "runAsGroup": 3001, "fsGroup": 3002}})
	for _, p := range r.pods(t) {
		if dataStoreIds[p.component] != 0 {
			continue // their own ids (datastores_test.go)
		}
		assert.EqualValues(t, 3000, *p.spec.SecurityContext.RunAsUser, p.name)
		assert.EqualValues(t, 3001, *p.spec.SecurityContext.RunAsGroup, p.name)
		assert.EqualValues(t, 3002, *p.spec.SecurityContext.FSGroup, p.name)
	}
}

// fakeCluster answers the chart's lookup calls from in-memory objects.
type fakeCluster struct {
	client *dynamicfake.FakeDynamicClient
}

func (f fakeCluster) GetClientFor(apiVersion, kind string) (dynamic.NamespaceableResourceInterface, bool, error) {
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return nil, false, err
	}
	switch kind {
	case "Secret":
		return f.client.Resource(gv.WithResource("secrets")), true, nil
	case "Namespace":
		return f.client.Resource(gv.WithResource("namespaces")), false, nil
	case "Service":
		return f.client.Resource(gv.WithResource("services")), true, nil
	case "EndpointSlice":
		return f.client.Resource(gv.WithResource("endpointslices")), true, nil
	case "StatefulSet":
		return f.client.Resource(gv.WithResource("statefulsets")), true, nil
	case "StorageClass":
		return f.client.Resource(gv.WithResource("storageclasses")), false, nil
	case "CSIDriver":
		return f.client.Resource(gv.WithResource("csidrivers")), false, nil
	}
	return nil, false, fmt.Errorf("lookup of %s not expected", kind)
}

// A Secret the values name must exist when the render can see the cluster; offline the render
// cannot tell and says nothing (check and install render with the cluster).
func TestMissingSecretsAreRefusedWhenTheClusterIsSeen(t *testing.T) {
	ch := loadChart(t)
	vals := mergeValues(map[string]any{
		"artifactsStore": map[string]any{"kind": "s3", "bucket": "s3://b", "secret": map[string]any{"name": "s3-creds"}},
		"connections":    []any{map[string]any{"name": "keys", "kind": "custom", "secret": map[string]any{"name": "api-keys", "mountPath": "/etc/secrets"}}},
	})
	kubeSystem := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "kube-system"}}}
	secret := func(name string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": name, "namespace": testNamespace}}}
	}
	_, err := renderWith(ch, vals, false, nil)
	require.NoError(t, err, "offline: not known, not refused")

	_, err = renderWith(ch, vals, false, clusterOf(kubeSystem))
	require.Error(t, err)
	assert.Contains(t, err.Error(), `artifactsStore.secret.name: Secret "s3-creds" not found in namespace "polyaxon"`)

	_, err = renderWith(ch, vals, false, clusterOf(kubeSystem, secret("s3-creds")))
	require.Error(t, err)
	assert.Contains(t, err.Error(), `connections[0].secret.name: Secret "api-keys" not found`)

	_, err = renderWith(ch, vals, false, clusterOf(kubeSystem, secret("s3-creds"), secret("api-keys")))
	require.NoError(t, err)
}

func secretsOf(t testing.TB, r rendered) map[string]map[string]string {
	out := map[string]map[string]string{}
	for _, o := range r.byKind("Secret") {
		data, _, _ := unstructured.NestedStringMap(o.Object, "data")
		out[o.GetName()] = data
	}
	return out
}

func TestGeneratedSecretsSurviveUpgrade(t *testing.T) {
	vals := mergeValues(everything)
	ch := loadChart(t)
	first, err := renderWith(ch, vals, false, nil)
	require.NoError(t, err)
	installed := secretsOf(t, first)
	require.Len(t, installed, 4, "platform, postgresql, rabbitmq and redis secrets")

	// Without the cluster a second render generates new values (what the official chart does on every upgrade).
	again, err := renderWith(ch, vals, true, nil)
	require.NoError(t, err)
	assert.NotEqual(t, installed["polyaxon-platform"]["POLYAXON_SECRET_KEY"], secretsOf(t, again)["polyaxon-platform"]["POLYAXON_SECRET_KEY"])

	// With the installed Secrets in the cluster, the upgrade render keeps every value.
	var objs []runtime.Object
	for _, o := range first.byKind("Secret") {
		objs = append(objs, o.DeepCopy())
	}
	cluster := clusterOf(objs...)
	upgraded, err := renderWith(ch, vals, true, cluster)
	require.NoError(t, err)
	assert.Equal(t, installed, secretsOf(t, upgraded))

	// A value given by the user wins over the stored one.
	withKey := mergeValues(vals, map[string]any{"secrets": map[string]any{"secretKey": "from-values"}})
	upgraded, err = renderWith(ch, withKey, true, cluster)
	require.NoError(t, err)
	assert.Equal(t, "ZnJvbS12YWx1ZXM=", secretsOf(t, upgraded)["polyaxon-platform"]["POLYAXON_SECRET_KEY"])
	assert.Equal(t, installed["polyaxon-platform"]["POLYAXON_SECRET_INTERNAL_TOKEN"], secretsOf(t, upgraded)["polyaxon-platform"]["POLYAXON_SECRET_INTERNAL_TOKEN"])
}

func TestDataIsKept(t *testing.T) {
	r := render(t, everything)
	for _, s := range r.byKind("StatefulSet") {
		var sts appsv1.StatefulSet
		decodeStrict(t, s, &sts)
		require.Len(t, sts.Spec.VolumeClaimTemplates, 1, "%s must persist its data by default", s.GetName())
		assert.Equal(t, "keep", sts.Spec.VolumeClaimTemplates[0].Annotations["helm.sh/resource-policy"], s.GetName())
	}
	for _, s := range r.byKind("Secret") {
		assert.Equal(t, "keep", s.GetAnnotations()["helm.sh/resource-policy"], s.GetName())
	}
}

func TestPostgresMajorVersionNamesTheDataVolume(t *testing.T) {
	claim := func(tag string) string {
		r := render(t, map[string]any{"postgresql": map[string]any{"image": map[string]any{"tag": tag}}})
		var sts appsv1.StatefulSet
		decodeStrict(t, r.get("StatefulSet", "polyaxon-postgresql"), &sts)
		return sts.Spec.VolumeClaimTemplates[0].Name
	}
	assert.Equal(t, "data-pg16", claim("16.4"))
	assert.Equal(t, "data-pg16", claim("16.6-bookworm"))
	assert.Equal(t, "data-pg17", claim("17.2"))
}

func TestExternalServices(t *testing.T) {
	_, err := renderWith(loadChart(t), map[string]any{"postgresql": map[string]any{"enabled": false}}, false, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "externalServices.postgresql.host")

	r := render(t, map[string]any{
		"postgresql":       map[string]any{"enabled": false},
		"externalServices": map[string]any{"postgresql": map[string]any{"host": "db.example.com", "existingSecret": "db-creds", "passwordKey": "pw"}},
	})
	assert.Nil(t, r.get("StatefulSet", "polyaxon-postgresql"))
	assert.Nil(t, r.get("Secret", "polyaxon-postgresql"), "the user's Secret is used, none is created")
	cfg, _, _ := unstructured.NestedStringMap(r.get("ConfigMap", "polyaxon-config").Object, "data")
	assert.Equal(t, "db.example.com", cfg["POLYAXON_DB_HOST"])
	var d appsv1.Deployment
	decodeStrict(t, r.get("Deployment", "polyaxon-gateway"), &d)
	env := d.Spec.Template.Spec.Containers[0].Env
	require.NotEmpty(t, env)
	assert.Equal(t, "POLYAXON_DB_PASSWORD", env[0].Name)
	assert.Equal(t, "db-creds", env[0].ValueFrom.SecretKeyRef.Name)
	assert.Equal(t, "pw", env[0].ValueFrom.SecretKeyRef.Key)

	_, err = renderWith(loadChart(t), map[string]any{"worker": map[string]any{"enabled": true}}, false, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "worker.enabled")
	assert.Contains(t, err.Error(), "redis.enabled=true")
}

func TestMigrationJob(t *testing.T) {
	appVersion := loadChart(t).Metadata.AppVersion
	name := "polyaxon-migrate-" + strings.ReplaceAll(appVersion, ".", "-")
	upgrade := func(vals map[string]any) rendered {
		r, err := renderWith(loadChart(t), vals, true, nil)
		require.NoError(t, err)
		return r
	}
	// A first install migrates in a Job of the release (no hook: the gateway waits for it, and
	// `helm install --wait` runs post-install hooks only once the gateway is Ready).
	for what, vals := range map[string]map[string]any{"defaults": nil, "hooks": {"migrations": map[string]any{"useHelmHooks": true}}} {
		install := render(t, vals).byKind("Job")
		require.Lenf(t, install, 1, "install, %s", what)
		assert.Equal(t, name, install[0].GetName())
		assert.NotContainsf(t, install[0].GetAnnotations(), "helm.sh/hook", "install, %s", what)
	}
	// Upgrades: polyaxon-deploy runs its own Job before Helm (no Job in the release), plain
	// Helm a pre-upgrade hook.
	assert.Empty(t, upgrade(nil).byKind("Job"), "by default the installer runs an upgrade's migrations itself")
	hook := upgrade(map[string]any{"migrations": map[string]any{"useHelmHooks": true}}).byKind("Job")
	require.Len(t, hook, 1)
	assert.Equal(t, name, hook[0].GetName())
	assert.Equal(t, "pre-upgrade", hook[0].GetAnnotations()["helm.sh/hook"])

	own := render(t, map[string]any{"migrations": map[string]any{"renderJob": true}}).byKind("Job")
	require.Len(t, own, 1)
	assert.Equal(t, "polyaxon-migrate-"+strings.ReplaceAll(appVersion, ".", "-"), own[0].GetName())
	assert.NotContains(t, own[0].GetAnnotations(), "helm.sh/hook")

	// An older Polyaxon's migrations: its own Job name, target version and image.
	old := render(t, map[string]any{"migrations": map[string]any{"renderJob": true}, "polyaxon": map[string]any{"version": oldestPolyaxon}}).byKind("Job")
	require.Len(t, old, 1)
	assert.Equal(t, "polyaxon-migrate-"+strings.ReplaceAll(oldestPolyaxon, ".", "-"), old[0].GetName())
	assert.Equal(t, oldestPolyaxon, old[0].GetAnnotations()["polyaxon-deploy/target-version"])
	var job batchv1.Job
	decodeStrict(t, old[0], &job)
	assert.Equal(t, "polyaxon/polyaxon-api:"+oldestPolyaxon, job.Spec.Template.Spec.Containers[0].Image)
}

// withRabbitMQ is the Polyaxon that still has RabbitMQ, with it as the broker: for the checks
// that must see a RabbitMQ pod.
var withRabbitMQ = map[string]any{"polyaxon": map[string]any{"version": oldestPolyaxon}, "broker": "rabbitmq", "rabbitmq": map[string]any{"enabled": true}}

// oldestPolyaxon is the oldest Polyaxon the chart supports whose programs the tests run
// (e2e/scripts/install-polyaxon.sh installs it beside the appVersion's): the last with RabbitMQ.
const oldestPolyaxon = "2.15.1"

// polyaxon.version moves every polyaxon/* image and the version label; out of the supported
// range, or RabbitMQ with a Polyaxon that has none, the render fails naming the value.
func TestPolyaxonVersion(t *testing.T) {
	ch := loadChart(t)
	for _, version := range []string{ch.Metadata.AppVersion, oldestPolyaxon} {
		r := render(t, profileValues(t, "production"), map[string]any{"polyaxon": map[string]any{"version": version}})
		for _, p := range r.pods(t) {
			for _, c := range append(p.spec.InitContainers, p.spec.Containers...) {
				if strings.HasPrefix(c.Image, "polyaxon/") {
					assert.True(t, strings.HasSuffix(c.Image, ":"+version), "%s/%s runs %s, not Polyaxon %s", p.name, c.Name, c.Image, version)
				}
			}
		}
		assert.Equal(t, version, r.get("Deployment", "polyaxon-gateway").GetLabels()["app.kubernetes.io/version"])
	}
	supported := ch.Metadata.Annotations["polyaxon-deploy/polyaxon-versions"]
	require.NotEmpty(t, supported)
	for _, version := range []string{"2.14.1", "2.19.0", "3.0.0"} {
		_, err := renderWith(ch, map[string]any{"polyaxon": map[string]any{"version": version}}, false, nil)
		require.Error(t, err, version)
		assert.Contains(t, err.Error(), fmt.Sprintf("polyaxon.version %q is outside the Polyaxon versions chart %s supports (%s)", version, ch.Metadata.Version, supported))
	}
	_, err := renderWith(ch, map[string]any{"broker": "rabbitmq", "rabbitmq": map[string]any{"enabled": true}}, false, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "broker: rabbitmq: Polyaxon "+ch.Metadata.AppVersion+" has no RabbitMQ broker (removed in 2.17): set broker=redis")
	_, err = renderWith(ch, map[string]any{"rabbitmq": map[string]any{"enabled": true}}, false, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "rabbitmq.enabled/externalServices.rabbitmq.host: Polyaxon "+ch.Metadata.AppVersion+" does not use RabbitMQ")
	// 2.15 still has it.
	_, err = renderWith(ch, map[string]any{"polyaxon": map[string]any{"version": oldestPolyaxon}, "broker": "rabbitmq", "rabbitmq": map[string]any{"enabled": true}, "scheduler": map[string]any{"enabled": true}}, false, nil)
	require.NoError(t, err)
}

func TestConfigChecksumFollowsConfigOnly(t *testing.T) {
	sum := func(r rendered) string {
		var d appsv1.Deployment
		decodeStrict(t, r.get("Deployment", "polyaxon-gateway"), &d)
		return d.Spec.Template.Annotations["checksum/config"]
	}
	base := sum(render(t))
	require.NotEmpty(t, base)
	assert.NotEqual(t, base, sum(render(t, map[string]any{"logLevel": "DEBUG"})), "a config change must roll the pods")
	assert.Equal(t, base, sum(render(t, map[string]any{"commonLabels": map[string]any{"team": "ml"}})), "a label change must not")
}

// Each process rolls when what it reads changes: its own ConfigMaps, and the secret inputs.
func TestChecksumsFollowWhatEachProcessReads(t *testing.T) {
	sums := func(r rendered, name string) map[string]string {
		var d appsv1.Deployment
		decodeStrict(t, r.get("Deployment", name), &d)
		return d.Spec.Template.Annotations
	}
	base := render(t, profileValues(t, "production"))
	agentCfg := render(t, profileValues(t, "production"), map[string]any{"runs": map[string]any{"sidecar": map[string]any{"syncInterval": 30}}})
	assert.NotEqual(t, sums(base, "polyaxon-agent")["checksum/agent-config"], sums(agentCfg, "polyaxon-agent")["checksum/agent-config"])
	assert.NotEqual(t, sums(base, "polyaxon-gateway")["checksum/agent-config"], sums(agentCfg, "polyaxon-gateway")["checksum/agent-config"], "the API compiles runs with the agent's configuration")
	assert.Equal(t, sums(base, "polyaxon-operator"), sums(agentCfg, "polyaxon-operator"), "the operator reads none of it")

	rotated := render(t, profileValues(t, "production"), map[string]any{"redis": map[string]any{"auth": map[string]any{"password": "rotated"}}})
	assert.NotEqual(t, sums(base, "polyaxon-scheduler")["checksum/secrets"], sums(rotated, "polyaxon-scheduler")["checksum/secrets"], "a new password rolls its clients")
	external := render(t, profileValues(t, "production"), map[string]any{"secrets": map[string]any{"existingSecret": "polyaxon-keys"}})
	assert.NotEqual(t, sums(base, "polyaxon-gateway")["checksum/secrets"], sums(external, "polyaxon-gateway")["checksum/secrets"], "switching to an existing Secret rolls the pods")
	labelled := render(t, profileValues(t, "production"), map[string]any{"commonLabels": map[string]any{"team": "ml"}})
	assert.Equal(t, sums(base, "polyaxon-gateway")["checksum/secrets"], sums(labelled, "polyaxon-gateway")["checksum/secrets"])
}

// GitOps: with an existing Secret for every generated one, a render generates nothing.
func TestExistingSecretsGenerateNothing(t *testing.T) {
	r := render(t, profileValues(t, "production"), map[string]any{
		"secrets":    map[string]any{"existingSecret": "polyaxon-keys"},
		"postgresql": map[string]any{"auth": map[string]any{"existingSecret": "pg-creds"}},
		// RabbitMQ too: the Polyaxon that still has it.
		"polyaxon": map[string]any{"version": oldestPolyaxon}, "broker": "rabbitmq",
		"rabbitmq": map[string]any{"enabled": true, "auth": map[string]any{"existingSecret": "mq-creds"}},
		"redis":    map[string]any{"auth": map[string]any{"existingSecret": "redis-creds"}},
	})
	assert.Empty(t, r.byKind("Secret"), "every Secret comes from the user")
	var sts appsv1.StatefulSet
	decodeStrict(t, r.get("StatefulSet", "polyaxon-rabbitmq"), &sts)
	for _, e := range sts.Spec.Template.Spec.Containers[0].Env {
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			assert.Equal(t, "mq-creds", e.ValueFrom.SecretKeyRef.Name, e.Name)
		}
	}
	decodeStrict(t, r.get("StatefulSet", "polyaxon-redis"), &sts)
	for _, e := range sts.Spec.Template.Spec.Containers[0].Env {
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			assert.Equal(t, "redis-creds", e.ValueFrom.SecretKeyRef.Name, e.Name)
		}
	}
	var d appsv1.Deployment
	decodeStrict(t, r.get("Deployment", "polyaxon-scheduler"), &d)
	refs := map[string]string{}
	for _, e := range d.Spec.Template.Spec.Containers[0].Env {
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			refs[e.Name] = e.ValueFrom.SecretKeyRef.Name
		}
	}
	assert.Equal(t, map[string]string{"POLYAXON_DB_PASSWORD": "pg-creds", "POLYAXON_RABBITMQ_PASSWORD": "mq-creds",
		"POLYAXON_REDIS_PASSWORD": "redis-creds", "POLYAXON_SECRET_KEY": "polyaxon-keys", "POLYAXON_SECRET_INTERNAL_TOKEN": "polyaxon-keys"}, refs)
}

func TestNotesWarn(t *testing.T) {
	r := render(t, map[string]any{"gateway": map[string]any{"image": map[string]any{"tag": "latest"}}, "postgresql": map[string]any{"persistence": map[string]any{"enabled": false}}})
	assert.Contains(t, r.notes, "rolling tag")
	assert.Contains(t, r.notes, "postgresql.persistence.enabled is false")
	assert.NotContains(t, render(t).notes, "WARNINGS")
}

// Polyaxon CE asks nobody to log in (issue 42): the NOTES never tell a user to, whatever
// auth.enabled says.
func TestNotesNeverPromiseALogin(t *testing.T) {
	for _, on := range []bool{false, true} {
		notes := render(t, map[string]any{"auth": map[string]any{"enabled": on}}).notes
		assert.NotContains(t, notes, "Log in", "auth.enabled=%v", on)
		assert.Contains(t, notes, "Polyaxon CE has no login: anyone who reaches the gateway uses Polyaxon", "auth.enabled=%v", on)
	}
	assert.Contains(t, render(t, map[string]any{"auth": map[string]any{"enabled": true}}).notes,
		`whatever auth.enabled says (it made the admin user "admin"`)

	// Behind the edge, the notes say where users log in, and that inside the cluster the
	// gateway's Service still has no login.
	notes := render(t, profileValues(t, "production"), map[string]any{
		"ingress": map[string]any{"enabled": true, "host": "polyaxon.example.com"},
		"edge":    map[string]any{"htpasswd": map[string]any{"secretName": "team-users"}},
	}).notes
	assert.Contains(t, notes, "Users log in at the authenticating edge (polyaxon-edge, oauth2-proxy) before they reach Polyaxon: with a user of Secret team-users")
	assert.Contains(t, notes, "inside the cluster, whoever reaches the gateway's Service uses it")
	assert.NotContains(t, notes, "anyone who reaches the gateway uses Polyaxon")
}

func TestLint(t *testing.T) {
	for name, vals := range map[string]map[string]any{"defaults": {}, "production": profileValues(t, "production"), "everything": everything} {
		t.Run(name, func(t *testing.T) {
			// `helm lint` lints in the context's namespace ("default" when it names none).
			lint := action.NewLint()
			lint.Namespace = testNamespace
			res := lint.Run([]string{"polyaxon"}, vals)
			for _, m := range res.Messages {
				assert.Less(t, m.Severity, 2, "lint: %s", m) // 2 = WarningSev and above fail
			}
			assert.Empty(t, res.Errors)
		})
	}
}

func TestOperatorWithoutAgent(t *testing.T) {
	r := render(t, map[string]any{"agent": map[string]any{"enabled": false}})
	assert.Nil(t, r.get("ConfigMap", "polyaxon-agent"))
	var d appsv1.Deployment
	decodeStrict(t, r.get("Deployment", "polyaxon-operator"), &d)
	for _, ef := range d.Spec.Template.Spec.Containers[0].EnvFrom {
		assert.NotEqual(t, "polyaxon-agent", ef.ConfigMapRef.Name, "the operator must not reference the absent runner ConfigMap")
	}
}

// Every container declares its resources; every long-running server has probes. The operator
// and the Celery processes expose no health endpoint the images document, so they have none:
// their Deployments restart them when they exit. Nor does the agent's `refusals` container, a
// watch that serves nothing and starts again by itself when its connection is lost.
func TestResourcesAndProbes(t *testing.T) {
	withoutProbes := map[string]bool{"operator": true, "scheduler": true, "worker": true, "beat": true, "migrations": true, "admin-user": true, "backup": true,
		"agent/refusals": true}
	for _, p := range render(t, everything).pods(t) {
		for _, c := range p.spec.Containers {
			assert.False(t, c.Resources.Requests.Cpu().IsZero(), "%s/%s has no cpu request", p.name, c.Name)
			assert.False(t, c.Resources.Requests.Memory().IsZero(), "%s/%s has no memory request", p.name, c.Name)
			assert.False(t, c.Resources.Limits.Memory().IsZero(), "%s/%s has no memory limit", p.name, c.Name)
			if withoutProbes[p.component] || withoutProbes[p.component+"/"+c.Name] {
				continue
			}
			assert.NotNil(t, c.LivenessProbe, "%s/%s has no liveness probe", p.name, c.Name)
			if p.component == "gateway" && c.Name != "proxy" {
				// haupt on the pod's loopback: the proxy's readiness probe goes through nginx to
				// the API, so the pod is Ready when the whole chain answers.
				continue
			}
			assert.NotNil(t, c.ReadinessProbe, "%s/%s has no readiness probe", p.name, c.Name)
		}
	}
}

// Several releases in different namespaces share the CRDs: they come from crds/ (installed
// once, never owned by a release), not from templates.
func TestCRDsAreSharedNotTemplated(t *testing.T) {
	assert.Empty(t, render(t, everything).byKind("CustomResourceDefinition"))
	ch := loadChart(t)
	var names []string
	for _, crd := range ch.CRDObjects() {
		names = append(names, crd.Name)
	}
	assert.ElementsMatch(t, []string{"crds/polyaxon.com_jobs.yaml", "crds/polyaxon.com_services.yaml", "crds/polyaxon.com_clusters.yaml", "crds/polyaxon.com_kfjobs.yaml"}, names)
}

// Gateway replicas prefer different nodes (an HA gateway on one node is not HA). The core
// co-location term would outweigh that preference (it counts every core pod on a node), so a
// gateway with several replicas does not inherit it; a single gateway keeps it, and so do the
// other core components, which still join the gateways. The e2e production install checks
// where the replicas really land.
func TestGatewayReplicasSpread(t *testing.T) {
	for _, p := range render(t, profileValues(t, "production")).pods(t) {
		if !isCore(p.component) {
			continue
		}
		require.NotNil(t, p.spec.Affinity, p.name)
		if p.component == "gateway" {
			assert.Nil(t, p.spec.Affinity.PodAffinity, "several gateway replicas must not co-locate")
			require.NotNil(t, p.spec.Affinity.PodAntiAffinity, p.name)
			term := p.spec.Affinity.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution[0].PodAffinityTerm
			assert.Equal(t, "kubernetes.io/hostname", term.TopologyKey)
			assert.Equal(t, "gateway", term.LabelSelector.MatchLabels["app.kubernetes.io/component"])
		} else {
			assert.NotNil(t, p.spec.Affinity.PodAffinity, "%s lost the core co-location", p.name)
			assert.Nil(t, p.spec.Affinity.PodAntiAffinity, "%s must not inherit the gateway's spread", p.name)
		}
	}

	gateway := func(vals map[string]any) *corev1.Affinity {
		for _, p := range render(t, vals).pods(t) {
			if p.component == "gateway" {
				return p.spec.Affinity
			}
		}
		t.Fatal("no gateway pod")
		return nil
	}
	single := gateway(map[string]any{"gateway": map[string]any{"replicas": 1}})
	assert.NotNil(t, single.PodAffinity, "a single gateway co-locates with the core")

	own := map[string]any{"podAffinity": map[string]any{"requiredDuringSchedulingIgnoredDuringExecution": []any{
		map[string]any{"topologyKey": "topology.kubernetes.io/zone", "labelSelector": map[string]any{"matchLabels": map[string]any{"app": "db"}}}}}}
	kept := gateway(map[string]any{"gateway": map[string]any{"replicas": 3, "affinity": own}})
	require.NotNil(t, kept.PodAffinity, "the gateway's own podAffinity is kept")
	require.Len(t, kept.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution, 1)
	assert.Empty(t, kept.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution, "the core term is still not inherited")
}

// The admin user's password and email reach createuser through the environment, never its
// command line (readable by every process of the node): the password from the platform Secret,
// the email as given, quotes included, whatever it holds.
func TestAdminUserHookKeepsItsInputsOffTheCommandLine(t *testing.T) {
	email := `ops@example.com", "--password=guessed`
	r := render(t, map[string]any{"auth": map[string]any{"enabled": true, "admin": map[string]any{"username": "root-admin", "email": email}},
		"secrets": map[string]any{"adminPassword": "s3cret-Admin-pass"}})
	var hook *podOf
	for _, p := range r.pods(t) {
		if p.component == "admin-user" {
			hook = &p
		}
	}
	require.NotNil(t, hook, "auth.enabled renders the admin-user Job")
	c := hook.spec.Containers[0]
	argv := strings.Join(append(slices.Clone(c.Command), c.Args...), " ")
	assert.Equal(t, []string{"shell", "--", "--command"}, c.Args[:3], "haupt manage runs Django's shell with the code after --")
	for _, secret := range []string{"s3cret-Admin-pass", "ops@example.com", "root-admin", "$(ADMIN_PASSWORD)"} {
		assert.NotContains(t, argv, secret)
	}
	env := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		env[e.Name] = e
	}
	assert.Equal(t, email, env["ADMIN_EMAIL"].Value)
	assert.Equal(t, "root-admin", env["ADMIN_USERNAME"].Value)
	require.NotNil(t, env["ADMIN_PASSWORD"].ValueFrom, "the password comes from the platform Secret")
	assert.Equal(t, "POLYAXON_ADMIN_PASSWORD", env["ADMIN_PASSWORD"].ValueFrom.SecretKeyRef.Key)
	assert.Equal(t, "polyaxon-platform", env["ADMIN_PASSWORD"].ValueFrom.SecretKeyRef.Name)
	for _, name := range []string{"ADMIN_USERNAME", "ADMIN_EMAIL", "ADMIN_PASSWORD"} {
		assert.Contains(t, c.Args[3], `os.environ["`+name+`"]`, "createuser reads %s", name)
	}
}
