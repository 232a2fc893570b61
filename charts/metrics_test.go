package charts_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// metricsOn is the production profile with every metrics value on and Redis in the cluster.
func metricsOn(t *testing.T) rendered {
	return render(t, profileValues(t, "production"), yamlValues(t, `
redis: {enabled: true}
metrics:
  enabled: true
  installer: {enabled: true}
  serviceMonitor: {enabled: true, labels: {release: kube-prometheus-stack}}
  prometheusRule: {enabled: true, labels: {release: kube-prometheus-stack}}`))
}

func containerNamed(t *testing.T, spec corev1.PodSpec, name string) corev1.Container {
	t.Helper()
	for _, c := range spec.Containers {
		if c.Name == name {
			return c
		}
	}
	require.Failf(t, "no such container", "%s", name)
	return corev1.Container{}
}

// TestMetricsExportersBesideTheStores: each store gets its exporter in its own pod, logged in
// with the store's own Secret over the loopback, and the operator its metrics port; a Service
// named for the Prometheus job selects each.
func TestMetricsExportersBesideTheStores(t *testing.T) {
	r := metricsOn(t)
	var pg, redis appsv1.StatefulSet
	decodeStrict(t, r.get("StatefulSet", "polyaxon-postgresql"), &pg)
	decodeStrict(t, r.get("StatefulSet", "polyaxon-redis"), &redis)
	var op appsv1.Deployment
	decodeStrict(t, r.get("Deployment", "polyaxon-operator"), &op)

	pgx := containerNamed(t, pg.Spec.Template.Spec, "metrics")
	assert.Equal(t, "quay.io/prometheuscommunity/postgres-exporter:v0.17.1", pgx.Image)
	assert.Equal(t, []corev1.ContainerPort{{Name: "metrics", ContainerPort: 9187, Protocol: corev1.ProtocolTCP}}, pgx.Ports)
	env := map[string]corev1.EnvVar{}
	for _, e := range pgx.Env {
		env[e.Name] = e
	}
	assert.Equal(t, "127.0.0.1:5432/polyaxon?sslmode=disable", env["DATA_SOURCE_URI"].Value)
	assert.Equal(t, "polyaxon", env["DATA_SOURCE_USER"].Value)
	require.NotNil(t, env["DATA_SOURCE_PASS"].ValueFrom)
	assert.Equal(t, "polyaxon-postgresql", env["DATA_SOURCE_PASS"].ValueFrom.SecretKeyRef.Name)
	assert.Equal(t, "postgres-password", env["DATA_SOURCE_PASS"].ValueFrom.SecretKeyRef.Key)
	assert.Nil(t, pgx.ReadinessProbe, "an exporter never takes Postgres out of its Service")
	require.NotNil(t, pgx.SecurityContext)
	assert.True(t, *pgx.SecurityContext.ReadOnlyRootFilesystem)

	rx := containerNamed(t, redis.Spec.Template.Spec, "metrics")
	assert.Equal(t, "oliver006/redis_exporter:v1.88.0", rx.Image)
	assert.Equal(t, int32(9121), rx.Ports[0].ContainerPort)

	opc := containerNamed(t, op.Spec.Template.Spec, "operator")
	assert.Equal(t, []string{"--metrics-bind-address=:8080"}, opc.Args)
	assert.Equal(t, int32(8080), opc.Ports[0].ContainerPort)

	for component, port := range map[string]int32{"postgresql": 9187, "redis": 9121, "operator": 8080} {
		var svc corev1.Service
		decodeStrict(t, r.get("Service", "polyaxon-"+component+"-metrics"), &svc)
		assert.Equal(t, component, svc.Spec.Selector["app.kubernetes.io/component"], component)
		assert.Equal(t, port, svc.Spec.Ports[0].Port, component)
		assert.Equal(t, "metrics", svc.Spec.Ports[0].TargetPort.StrVal, component)
		assert.Equal(t, "true", svc.Labels["polyaxon-deploy/metrics"], "the ServiceMonitor selects it")
	}

	sm := r.get("ServiceMonitor", "polyaxon")
	require.NotNil(t, sm)
	assert.Equal(t, "kube-prometheus-stack", sm.GetLabels()["release"])
	sel, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
	assert.Equal(t, "true", sel["polyaxon-deploy/metrics"])
	rule := r.get("PrometheusRule", "polyaxon")
	require.NotNil(t, rule)
	assert.Equal(t, "kube-prometheus-stack", rule.GetLabels()["release"])
	assertRestricted(t, r)
}

// TestMetricsOffRendersNothing: by default no exporter runs and no metrics object exists.
func TestMetricsOffRendersNothing(t *testing.T) {
	r := render(t, profileValues(t, "production"), yamlValues(t, `redis: {enabled: true}`))
	for _, p := range r.pods(t) {
		for _, c := range p.spec.Containers {
			assert.NotEqual(t, "metrics", c.Name, p.name)
			for _, port := range c.Ports {
				assert.NotEqual(t, "metrics", port.Name, p.name)
			}
		}
	}
	for _, kind := range []string{"ServiceMonitor", "PrometheusRule"} {
		assert.Empty(t, r.byKind(kind))
	}
	assert.Nil(t, r.get("NetworkPolicy", "polyaxon-metrics"))
	assert.Nil(t, r.get("Service", "polyaxon-postgresql-metrics"))
}

// TestMetricsPortsOpenToTheScraperOnly: the metrics ports of the stores and the operator admit
// the scraper's namespace and nothing else; run pods keep away from them as before.
func TestMetricsPortsOpenToTheScraperOnly(t *testing.T) {
	r := metricsOn(t)
	var np networkingv1.NetworkPolicy
	decodeStrict(t, r.get("NetworkPolicy", "polyaxon-metrics"), &np)
	require.Len(t, np.Spec.PodSelector.MatchExpressions, 1)
	assert.Equal(t, []string{"installer-exporter", "operator", "postgresql", "redis"}, np.Spec.PodSelector.MatchExpressions[0].Values)
	require.Len(t, np.Spec.Ingress, 1)
	from := np.Spec.Ingress[0].From
	require.Len(t, from, 1)
	assert.Nil(t, from[0].PodSelector)
	assert.Equal(t, map[string]string{"kubernetes.io/metadata.name": "monitoring"}, from[0].NamespaceSelector.MatchLabels)
	var ports []int32
	for _, p := range np.Spec.Ingress[0].Ports {
		ports = append(ports, p.Port.IntVal)
	}
	assert.ElementsMatch(t, []int32{9187, 9121, 8080, 9150}, ports)

	// Postgres's own policy still admits only the platform's pods, on Postgres's port.
	var pg networkingv1.NetworkPolicy
	decodeStrict(t, r.get("NetworkPolicy", "polyaxon-postgresql"), &pg)
	require.Len(t, pg.Spec.Ingress, 1)
	assert.Equal(t, int32(5432), pg.Spec.Ingress[0].Ports[0].Port.IntVal)
}

// TestInstallerExporterOnlyReads: polyaxon-deploy's exporter may read its release's facts
// ConfigMap by name and get or list the guards' kinds, nothing else: no Secret (Helm's record of
// the release holds the passwords), no write, no other ConfigMap. It calls only the API server
// (its addresses known at install) and lands on the core pool as the restricted profile wants.
func TestInstallerExporterOnlyReads(t *testing.T) {
	r := metricsOn(t)
	const name = "polyaxon-installer-exporter"
	var role rbacv1.Role
	decodeStrict(t, r.get("Role", name), &role)
	require.Len(t, role.Rules, 1)
	assert.Equal(t, []string{"configmaps"}, role.Rules[0].Resources)
	assert.Equal(t, []string{"polyaxon-deploy-facts"}, role.Rules[0].ResourceNames)
	assert.Equal(t, []string{"get"}, role.Rules[0].Verbs)
	var cr rbacv1.ClusterRole
	decodeStrict(t, r.get("ClusterRole", "polyaxon-"+name), &cr)
	for _, rule := range cr.Rules {
		assert.Subset(t, []string{"get", "list"}, rule.Verbs, "rule %v", rule)
		assert.NotContains(t, rule.Resources, "secrets")
		assert.NotContains(t, rule.Resources, "*")
		assert.NotContains(t, rule.Resources, "configmaps")
	}

	var d appsv1.Deployment
	decodeStrict(t, r.get("Deployment", name), &d)
	c := containerNamed(t, d.Spec.Template.Spec, "exporter")
	assert.Equal(t, "ghcr.io/polyaxon-deploy/polyaxon-deploy:"+loadChart(t).Metadata.Version, c.Image)
	assert.Equal(t, []string{"exporter", "--namespace=polyaxon", "--release=polyaxon", "--listen=:9150"}, c.Args)
	assert.Equal(t, map[string]string{"polyaxon": "core"}, d.Spec.Template.Spec.NodeSelector)
	assert.True(t, *c.SecurityContext.ReadOnlyRootFilesystem)

	var np networkingv1.NetworkPolicy
	decodeStrict(t, r.get("NetworkPolicy", name), &np)
	assert.Equal(t, []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}, np.Spec.PolicyTypes)
	require.Len(t, np.Spec.Egress, 1)
	assert.Empty(t, np.Spec.Egress[0].To, "offline, the API server's addresses are unknown: it may call out (the dependencies admit only core pods)")
	withAPI := render(t, profileValues(t, "production"), yamlValues(t, `
metrics: {enabled: true, installer: {enabled: true}}
networkPolicy: {runs: {apiServerCIDRs: [10.0.0.1/32]}}`))
	decodeStrict(t, withAPI.get("NetworkPolicy", name), &np)
	require.Len(t, np.Spec.Egress, 1)
	require.Len(t, np.Spec.Egress[0].To, 1)
	assert.Equal(t, "10.0.0.1/32", np.Spec.Egress[0].To[0].IPBlock.CIDR, "known, the API server's addresses alone")
}

// TestMetricsRefusedAtRender: values that would open the metrics ports to everyone, or ask for
// Prometheus objects with nothing to scrape, fail the render naming the value and the fix.
func TestMetricsRefusedAtRender(t *testing.T) {
	prod := profileValues(t, "production")
	cases := []struct {
		name, vals string
		want       []string
	}{
		{"no scraper namespace", `metrics: {enabled: true, scraperNamespaceSelector: null}`,
			[]string{"metrics.scraperNamespaceSelector is empty", "every namespace", "name the namespace of your Prometheus"}},
		{"a ServiceMonitor with no exporter", `metrics: {serviceMonitor: {enabled: true}}`,
			[]string{"metrics.serviceMonitor.enabled or metrics.prometheusRule.enabled is set but metrics.enabled is false", "set metrics.enabled=true"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := renderWith(loadChart(t), mergeValues(prod, yamlValues(t, tc.vals)), false, nil)
			require.Error(t, err)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
	for _, bad := range []string{
		`metrics: {prometheusRule: {connectionsRatio: 1.5}}`,
		`metrics: {prometheusRule: {runPendingFor: "half an hour"}}`,
		`metrics: {serviceMonitor: {interval: 30}}`,
		`metrics: {exporters: true}`,
	} {
		err := validateValues(t, prod, yamlValues(t, bad))
		require.Error(t, err, bad)
		assert.Contains(t, err.Error(), "metrics", bad)
	}
}

// promtool is the binary e2e/scripts/build-promtool.sh builds (or has built: then it only
// prints the path).
func promtool(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("promtool is built by make test (e2e/scripts/build-promtool.sh); -short does not build it")
	}
	out, err := exec.Command("bash", filepath.Join("..", "e2e", "scripts", "build-promtool.sh")).Output()
	require.NoError(t, err, "building promtool: %s", exitStderr(err))
	return strings.TrimSpace(string(out))
}

func exitStderr(err error) string {
	if ee, ok := err.(*exec.ExitError); ok {
		return string(ee.Stderr)
	}
	return ""
}

// rulesOf writes the rendered PrometheusRule's spec as a Prometheus rules file in dir.
func rulesOf(t *testing.T, r rendered, dir string) string {
	t.Helper()
	rule := r.get("PrometheusRule", "polyaxon")
	require.NotNil(t, rule)
	spec, _, _ := unstructured.NestedMap(rule.Object, "spec")
	b, err := yaml.Marshal(spec)
	require.NoError(t, err)
	path := filepath.Join(dir, "rules.yaml")
	require.NoError(t, os.WriteFile(path, b, 0o644))
	return path
}

// TestAlertRulesPassPromtool: the rendered alerts are valid rules for Prometheus (promtool check
// rules), and each fires and clears as testdata/alerts says (promtool test rules: a series per
// case, the alert's labels and annotations as a team receives them).
func TestAlertRulesPassPromtool(t *testing.T) {
	bin := promtool(t)
	dir := t.TempDir()
	rulesOf(t, metricsOn(t), dir)
	out, err := exec.Command(bin, "check", "rules", filepath.Join(dir, "rules.yaml")).CombinedOutput()
	require.NoError(t, err, "promtool check rules:\n%s", out)
	t.Logf("promtool check rules:\n%s", out)

	cases, err := filepath.Glob(filepath.Join("testdata", "alerts", "*.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, cases)
	fired := map[string]bool{}
	for _, c := range cases {
		raw, err := os.ReadFile(c)
		require.NoError(t, err)
		var tests struct {
			Tests []struct {
				AlertRuleTest []struct {
					Alertname string
					ExpAlerts []any `json:"exp_alerts"`
				} `json:"alert_rule_test"`
			}
		}
		require.NoError(t, yaml.Unmarshal(raw, &tests), c)
		for _, tg := range tests.Tests {
			for _, a := range tg.AlertRuleTest {
				fired[a.Alertname] = fired[a.Alertname] || len(a.ExpAlerts) > 0
			}
		}
		require.NoError(t, os.WriteFile(filepath.Join(dir, filepath.Base(c)), raw, 0o644))
		out, err := exec.Command(bin, "test", "rules", filepath.Join(dir, filepath.Base(c))).CombinedOutput()
		assert.NoError(t, err, "promtool test rules %s:\n%s", c, out)
		t.Logf("promtool test rules %s:\n%s", c, out)
	}
	for _, name := range alertNames(t, dir) {
		assert.True(t, fired[name], "alert %s has no case in testdata/alerts in which it fires", name)
	}
}

// alertNames are the alerts of the rules file rulesOf wrote in dir.
func alertNames(t *testing.T, dir string) []string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, "rules.yaml"))
	require.NoError(t, err)
	var f struct {
		Groups []struct{ Rules []struct{ Alert string } }
	}
	require.NoError(t, yaml.Unmarshal(raw, &f))
	var names []string
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			names = append(names, r.Alert)
		}
	}
	require.NotEmpty(t, names)
	return names
}

// dashboardVars are the values the test gives the dashboard's variables: the test release's.
var dashboardVars = strings.NewReplacer("$namespace", testNamespace, "$runs_namespace", testNamespace+"-runs", "$release", testRelease)

// TestDashboardShowsWhatTheAlertsRead: the Grafana dashboard (files/dashboard.json) is valid
// JSON whose every query, with its variables given the test release's values, is valid PromQL
// (promtool checks them as recording rules); it reads every metric the alerts read, and the
// chart ships it byte for byte in a ConfigMap labelled for Grafana's sidecar.
func TestDashboardShowsWhatTheAlertsRead(t *testing.T) {
	bin := promtool(t)
	raw, err := os.ReadFile(filepath.Join("polyaxon", "files", "dashboard.json"))
	require.NoError(t, err)
	var dash struct {
		UID    string
		Panels []struct {
			ID         int
			Title      string
			Type       string
			Datasource struct{ UID string }
			Targets    []struct{ Expr string }
		}
	}
	require.NoError(t, json.Unmarshal(raw, &dash))
	assert.Equal(t, "polyaxon-deploy", dash.UID)

	var rules []map[string]string
	shown := map[string]bool{}
	titles := map[string]bool{}
	for _, p := range dash.Panels {
		assert.False(t, titles[p.Title], "two panels named %q", p.Title)
		titles[p.Title] = true
		if p.Type == "row" {
			continue
		}
		assert.Equal(t, "${datasource}", p.Datasource.UID, "panel %q reads the dashboard's chosen Prometheus", p.Title)
		require.NotEmpty(t, p.Targets, "panel %q", p.Title)
		for _, q := range p.Targets {
			expr := dashboardVars.Replace(q.Expr)
			assert.NotContains(t, expr, "$", "panel %q: a variable the dashboard does not define", p.Title)
			rules = append(rules, map[string]string{"record": fmt.Sprintf("dashboard:panel_%d:%d", p.ID, len(rules)), "expr": expr})
			for _, m := range metricName.FindAllString(expr, -1) {
				shown[m] = true
			}
		}
	}
	dir := t.TempDir()
	b, err := yaml.Marshal(map[string]any{"groups": []any{map[string]any{"name": "dashboard", "rules": rules}}})
	require.NoError(t, err)
	path := filepath.Join(dir, "dashboard-queries.yaml")
	require.NoError(t, os.WriteFile(path, b, 0o644))
	out, err := exec.Command(bin, "check", "rules", path).CombinedOutput()
	require.NoError(t, err, "promtool check rules on the dashboard's queries:\n%s", out)

	r := render(t, profileValues(t, "production"), yamlValues(t, `
metrics: {enabled: true, installer: {enabled: true}, prometheusRule: {enabled: true}, dashboard: {enabled: true}}
redis: {enabled: true}`))
	rulesOf(t, r, dir)
	rawRules, err := os.ReadFile(filepath.Join(dir, "rules.yaml"))
	require.NoError(t, err)
	for _, m := range metricName.FindAllString(string(rawRules), -1) {
		assert.True(t, shown[m], "the alerts read %s; the dashboard shows it nowhere", m)
	}

	cm := r.get("ConfigMap", "polyaxon-dashboard")
	require.NotNil(t, cm)
	assert.Equal(t, "1", cm.GetLabels()["grafana_dashboard"])
	data, _, _ := unstructured.NestedStringMap(cm.Object, "data")
	assert.Equal(t, string(raw), data["polyaxon.json"])
}

// metricName matches the metric names a rule or a panel reads (the exporters', the kubelet's,
// kube-state-metrics', polyaxon-deploy's exporter's and up).
var metricName = regexp.MustCompile(`\b(?:pg_[a-z_]+|redis_[a-z_]+|kube_[a-z_]+|kubelet_[a-z_]+|polyaxon_deploy_[a-z_]+|up)\b`)
