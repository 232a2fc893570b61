package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensions "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster"
)

// monitoringNS is where the kind scenario runs Prometheus and kube-state-metrics: the name the
// chart's metrics.scraperNamespaceSelector admits by default.
const monitoringNS = "monitoring"

var (
	serviceMonitorsGVR = schema.GroupVersionResource{Group: "monitoring.coreos.com", Version: "v1", Resource: "servicemonitors"}
	prometheusRulesGVR = schema.GroupVersionResource{Group: "monitoring.coreos.com", Version: "v1", Resource: "prometheusrules"}
)

// metricsSets turn the chart's metrics on in the kind scenario: the exporter beside Postgres,
// the operator's metrics, polyaxon-deploy's exporter, a ServiceMonitor and the PrometheusRule.
var metricsSets = []string{"--set", "metrics.enabled=true", "--set", "metrics.installer.enabled=true",
	"--set", "metrics.serviceMonitor.enabled=true", "--set", "metrics.prometheusRule.enabled=true"}

// installMonitoringCRDs creates the Prometheus Operator's ServiceMonitor and PrometheusRule CRDs
// (e2e/scripts/build-monitoring.sh's, of the module's example/prometheus-operator-crd), so that
// the release's objects of those kinds are validated by the API server against their schemas.
func installMonitoringCRDs(t *testing.T, c *cluster.Cluster, dir string) {
	t.Helper()
	ctx := ctxT(t, 2*time.Minute)
	cs, err := apiextensions.NewForConfig(c.RESTConfig)
	require.NoError(t, err)
	for _, f := range []string{"monitoring.coreos.com_servicemonitors.yaml", "monitoring.coreos.com_prometheusrules.yaml"} {
		raw, err := os.ReadFile(filepath.Join(dir, f))
		require.NoError(t, err)
		var crd apiextensionsv1.CustomResourceDefinition
		require.NoError(t, yaml.Unmarshal(raw, &crd), f)
		_, err = cs.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, &crd, metav1.CreateOptions{})
		require.NoError(t, err, f)
	}
	dyn, err := dynamic.NewForConfig(c.RESTConfig)
	require.NoError(t, err)
	waitFor(t, time.Minute, "ServiceMonitor and PrometheusRule served", func(ctx context.Context) (bool, string, error) {
		for _, gvr := range []schema.GroupVersionResource{serviceMonitorsGVR, prometheusRulesGVR} {
			if _, err := dyn.Resource(gvr).List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
				return false, err.Error(), nil
			}
		}
		return true, "", nil
	})
}

// prometheusConfig is the configuration of a Prometheus that scrapes what the release's
// ServiceMonitor selects, as the Prometheus Operator would: Services of its namespaces carrying
// its selector's labels, their endpoints on its port, job the Service's name; and
// kube-state-metrics, whose series keep their own namespace and deployment labels.
func prometheusConfig(t *testing.T, sm *unstructured.Unstructured) string {
	t.Helper()
	namespaces, _, _ := unstructured.NestedStringSlice(sm.Object, "spec", "namespaceSelector", "matchNames")
	selector, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
	endpoints, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	require.Len(t, endpoints, 1)
	ep := endpoints[0].(map[string]any)
	require.NotEmpty(t, namespaces)
	require.NotEmpty(t, selector)
	invalid := regexp.MustCompile(`[^a-zA-Z0-9_]`)
	keys := make([]string, 0, len(selector))
	for k := range selector {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var relabel []map[string]any
	for _, k := range keys {
		relabel = append(relabel, map[string]any{"action": "keep", "source_labels": []string{"__meta_kubernetes_service_label_" + invalid.ReplaceAllString(k, "_")}, "regex": selector[k]})
	}
	relabel = append(relabel,
		map[string]any{"action": "keep", "source_labels": []string{"__meta_kubernetes_endpoint_port_name"}, "regex": ep["port"]},
		map[string]any{"action": "replace", "source_labels": []string{"__meta_kubernetes_service_name"}, "target_label": "job"},
		map[string]any{"action": "replace", "source_labels": []string{"__meta_kubernetes_namespace"}, "target_label": "namespace"},
		map[string]any{"action": "replace", "source_labels": []string{"__meta_kubernetes_pod_name"}, "target_label": "pod"})
	cfg := map[string]any{
		"global":     map[string]any{"scrape_interval": "5s", "evaluation_interval": "5s"},
		"rule_files": []string{"/etc/prometheus/rules.yaml"},
		"scrape_configs": []any{
			map[string]any{"job_name": "servicemonitor/" + sm.GetNamespace() + "/" + sm.GetName(), "metrics_path": ep["path"],
				"kubernetes_sd_configs": []any{map[string]any{"role": "endpoints", "namespaces": map[string]any{"names": namespaces}}},
				"relabel_configs":       relabel},
			map[string]any{"job_name": "kube-state-metrics", "honor_labels": true,
				"static_configs": []any{map[string]any{"targets": []string{"kube-state-metrics." + monitoringNS + ".svc:8080"}}}},
		},
	}
	b, err := yaml.Marshal(cfg)
	require.NoError(t, err)
	return string(b)
}

// startMonitoring runs kube-state-metrics and a Prometheus (the images built here) on the
// builds node, in namespace monitoring; Prometheus scrapes what the release's ServiceMonitor
// selects and evaluates its PrometheusRule, both read back from the API server. Returns
// Prometheus's URL through a port-forward.
func startMonitoring(t *testing.T, c *cluster.Cluster, ns string, images []string) string {
	t.Helper()
	ctx := ctxT(t, 5*time.Minute)
	dyn, err := dynamic.NewForConfig(c.RESTConfig)
	require.NoError(t, err)
	sms, err := dyn.Resource(serviceMonitorsGVR).Namespace(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, sms.Items, 1, "the release's ServiceMonitor")
	rules, err := dyn.Resource(prometheusRulesGVR).Namespace(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, rules.Items, 1, "the release's PrometheusRule")
	spec, _, _ := unstructured.NestedMap(rules.Items[0].Object, "spec")
	rulesYAML, err := yaml.Marshal(spec)
	require.NoError(t, err)

	cs := c.Clientset
	_, err = cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: monitoringNS}}, metav1.CreateOptions{})
	require.NoError(t, err)
	type reader struct {
		name  string
		rules []rbacv1.PolicyRule
	}
	for _, r := range []reader{
		{"prometheus", []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"services", "endpoints", "pods"}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"get", "list", "watch"}}}},
		{"kube-state-metrics", []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods", "namespaces"}, Verbs: []string{"list", "watch"}},
			{APIGroups: []string{"apps"}, Resources: []string{"deployments", "statefulsets"}, Verbs: []string{"list", "watch"}}}},
	} {
		name := "e2e-" + r.name
		_, err := cs.CoreV1().ServiceAccounts(monitoringNS).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: r.name}}, metav1.CreateOptions{})
		require.NoError(t, err)
		_, err = cs.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: r.rules}, metav1.CreateOptions{})
		require.NoError(t, err)
		_, err = cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: r.name, Namespace: monitoringNS}}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	_, err = cs.CoreV1().ConfigMaps(monitoringNS).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "prometheus"},
		Data: map[string]string{"prometheus.yml": prometheusConfig(t, &sms.Items[0]), "rules.yaml": string(rulesYAML)}}, metav1.CreateOptions{})
	require.NoError(t, err)

	// Ready only once it answers on its port: a port-forward whose first connection is refused
	// (the program not listening yet) serves no later one (seen with kubectl 1.37).
	deployment := func(name, image string, port int32, ready string, args []string, mounts []corev1.VolumeMount, volumes []corev1.Volume) {
		labels := map[string]string{"app": name}
		_, err := cs.AppsV1().Deployments(monitoringNS).Create(ctx, &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: appsv1.DeploymentSpec{Replicas: ptr.To(int32(1)), Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
					ServiceAccountName: name,
					NodeSelector:       map[string]string{cluster.PoolLabel: cluster.PoolBuilds},
					SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To(int64(65534)), FSGroup: ptr.To(int64(65534)),
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
					Containers: []corev1.Container{{Name: name, Image: image, ImagePullPolicy: corev1.PullNever, Args: args,
						Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: port}},
						ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: ready, Port: intstr.FromString("http")}},
							PeriodSeconds: 2},
						VolumeMounts: mounts,
						SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true),
							Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}}},
					Volumes: volumes}}}}, metav1.CreateOptions{})
		require.NoError(t, err, name)
		_, err = cs.CoreV1().Services(monitoringNS).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{Name: "http", Port: port, TargetPort: intstr.FromString("http")}}}}, metav1.CreateOptions{})
		require.NoError(t, err, name)
	}
	deployment("kube-state-metrics", imageOf(t, images, "polyaxon-deploy/kube-state-metrics"), 8080, "/healthz",
		[]string{"--port=8080", "--telemetry-port=8081", "--resources=deployments,pods,statefulsets,namespaces"}, nil, nil)
	deployment("prometheus", imageOf(t, images, "polyaxon-deploy/prometheus"), 9090, "/-/ready",
		[]string{"--config.file=/etc/prometheus/prometheus.yml", "--storage.tsdb.path=/prometheus", "--web.listen-address=:9090"},
		[]corev1.VolumeMount{{Name: "config", MountPath: "/etc/prometheus"}, {Name: "data", MountPath: "/prometheus"}},
		[]corev1.Volume{{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "prometheus"}}}},
			{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}})
	waitFor(t, 3*time.Minute, "Prometheus and kube-state-metrics available", func(ctx context.Context) (bool, string, error) {
		for _, name := range []string{"prometheus", "kube-state-metrics"} {
			d, err := cs.AppsV1().Deployments(monitoringNS).Get(ctx, name, metav1.GetOptions{})
			if err != nil || d.Status.AvailableReplicas < 1 {
				return false, name + " not available", nil
			}
		}
		return true, "", nil
	})
	t.Cleanup(func() {
		if t.Failed() {
			logMonitoringPods(t, c)
		}
	})
	return kindPortForward(t, c, monitoringNS, "svc/prometheus", 9090)
}

// logMonitoringPods logs the monitoring pods' state and last log lines.
func logMonitoringPods(t *testing.T, c *cluster.Cluster) {
	ctx := ctxT(t, time.Minute)
	pods, err := c.Clientset.CoreV1().Pods(monitoringNS).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Logf("listing %s's pods: %v", monitoringNS, err)
		return
	}
	for _, p := range pods.Items {
		var states []string
		for _, cs := range p.Status.ContainerStatuses {
			states = append(states, fmt.Sprintf("%s ready=%t restarts=%d", cs.Name, cs.Ready, cs.RestartCount))
		}
		logs, _ := c.Clientset.CoreV1().Pods(monitoringNS).GetLogs(p.Name, &corev1.PodLogOptions{TailLines: ptr.To(int64(30))}).DoRaw(ctx)
		t.Logf("pod %s/%s on %s: %s %v\n%s", monitoringNS, p.Name, p.Spec.NodeName, p.Status.Phase, states, logs)
	}
}

// promTargets are Prometheus's active targets: job -> health ("up", "down", "unknown").
func promTargets(ctx context.Context, base string) (map[string]string, error) {
	var body struct {
		Data struct {
			ActiveTargets []struct {
				Labels    map[string]string `json:"labels"`
				Health    string            `json:"health"`
				LastError string            `json:"lastError"`
			} `json:"activeTargets"`
		} `json:"data"`
	}
	if err := promGet(ctx, base+"/api/v1/targets?state=active", &body); err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, tg := range body.Data.ActiveTargets {
		h := tg.Health
		if tg.LastError != "" {
			h += " (" + tg.LastError + ")"
		}
		out[tg.Labels["job"]] = h
	}
	return out, nil
}

// promFiring are the alerts firing now.
func promFiring(ctx context.Context, base string) (map[string]bool, error) {
	var body struct {
		Data struct {
			Alerts []struct {
				Labels map[string]string `json:"labels"`
				State  string            `json:"state"`
			} `json:"alerts"`
		} `json:"data"`
	}
	if err := promGet(ctx, base+"/api/v1/alerts", &body); err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, a := range body.Data.Alerts {
		if a.State == "firing" {
			out[a.Labels["alertname"]] = true
		}
	}
	return out, nil
}

// promQuery is the value of an instant query with one result ("" when it has none).
func promQuery(ctx context.Context, base, q string) (string, error) {
	var body struct {
		Data struct {
			Result []struct {
				Value []any `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := promGet(ctx, base+"/api/v1/query?query="+url.QueryEscape(q), &body); err != nil {
		return "", err
	}
	if len(body.Data.Result) == 0 || len(body.Data.Result[0].Value) < 2 {
		return "", nil
	}
	return fmt.Sprint(body.Data.Result[0].Value[1]), nil
}

// promClient bounds each request: one that hangs must not use up a wait's whole deadline.
var promClient = &http.Client{Timeout: 10 * time.Second}

func promGet(ctx context.Context, u string, into any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := promClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(into)
}

// scaleTo sets the replicas of a Deployment or StatefulSet of ns.
func scaleTo(t *testing.T, c *cluster.Cluster, ns, kind, name string, n int32) {
	t.Helper()
	ctx := ctxT(t, time.Minute)
	patch := []byte(fmt.Sprintf(`{"spec":{"replicas":%d}}`, n))
	var err error
	switch kind {
	case "Deployment":
		_, err = c.Clientset.AppsV1().Deployments(ns).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	case "StatefulSet":
		_, err = c.Clientset.AppsV1().StatefulSets(ns).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	}
	require.NoError(t, err, "scale %s %s to %d", kind, name, n)
}

// kindMetricsScenario (issue 57 item 3): a Prometheus built here scrapes the release through
// what its ServiceMonitor selects, and every target is up; with the gateway scaled to 0 the
// API-down alert fires, with Postgres stopped its alert fires, and both clear once they are
// back. Each moment is logged with the time since the change.
func kindMetricsScenario(t *testing.T, c *cluster.Cluster, ns string, images []string) {
	assertAlertsFireAndClear(t, c, ns, startMonitoring(t, c, ns, images))
}

// assertAlertsFireAndClear is kindMetricsScenario's test of the Prometheus at prom.
func assertAlertsFireAndClear(t *testing.T, c *cluster.Cluster, ns, prom string) {
	gateway, postgres := releaseName+"-gateway", releaseName+"-postgresql"
	exporter := releaseName + "-installer-exporter-metrics"
	wantJobs := []string{releaseName + "-postgresql-metrics", releaseName + "-operator-metrics", exporter, "kube-state-metrics"}
	start := time.Now()
	waitFor(t, 3*time.Minute, "every target up", func(ctx context.Context) (bool, string, error) {
		targets, err := promTargets(ctx, prom)
		if err != nil {
			return false, err.Error(), nil
		}
		for _, job := range wantJobs {
			if targets[job] != "up" {
				return false, fmt.Sprintf("targets %v", targets), nil
			}
		}
		for job, h := range targets {
			if h != "up" {
				return false, fmt.Sprintf("%s is %s", job, h), nil
			}
		}
		return true, "", nil
	})
	ctx := ctxT(t, time.Minute)
	targets, err := promTargets(ctx, prom)
	require.NoError(t, err)
	pgUp, err := promQuery(ctx, prom, fmt.Sprintf(`pg_up{namespace=%q, job=%q}`, ns, postgres+"-metrics"))
	require.NoError(t, err)
	assert.Equal(t, "1", pgUp)
	firing, err := promFiring(ctx, prom)
	require.NoError(t, err)
	t.Logf("Prometheus's targets after %s: %v; pg_up %s; firing: %v", time.Since(start).Round(time.Second), targets, pgUp, firing)
	for _, a := range []string{"PolyaxonAPIUnavailable", "PolyaxonPostgresDown", "PolyaxonOperatorDown", "PolyaxonKubeStateMetricsMissing",
		"PolyaxonInstallerExporterDown", "PolyaxonGuardMissing", "PolyaxonGuardWidened", "PolyaxonBackupFailed", "PolyaxonBackupTooOld", "PolyaxonUpgradeFailed"} {
		assert.False(t, firing[a], "%s fires on a healthy release", a)
	}
	// polyaxon-deploy's exporter, in the cluster with the chart's rights and NetworkPolicy: every
	// guard read and there, and the upgrade's backup and result (the scenario upgraded before).
	for q, want := range map[string]string{
		fmt.Sprintf(`polyaxon_deploy_guards_up{job=%q}`, exporter):                         "1",
		fmt.Sprintf(`count(polyaxon_deploy_guard_ok{job=%q} == 1) > 20`, exporter):         "",
		fmt.Sprintf(`count(polyaxon_deploy_guard_ok{job=%q} == 0) or vector(0)`, exporter): "0",
		fmt.Sprintf(`polyaxon_deploy_backup_last_attempt_success{job=%q}`, exporter):       "1",
		fmt.Sprintf(`polyaxon_deploy_upgrade_last_success{job=%q}`, exporter):              "1",
	} {
		got, err := promQuery(ctx, prom, q)
		require.NoError(t, err)
		if want == "" {
			assert.NotEmpty(t, got, q)
		} else {
			assert.Equal(t, want, got, q)
		}
		t.Logf("%s: %s", q, got)
	}

	// The failure: no gateway pod, no Postgres pod.
	down := time.Now()
	scaleTo(t, c, ns, "Deployment", gateway, 0)
	scaleTo(t, c, ns, "StatefulSet", postgres, 0)
	fired := map[string]time.Duration{}
	waitFor(t, 5*time.Minute, "PolyaxonAPIUnavailable and PolyaxonPostgresDown firing", func(ctx context.Context) (bool, string, error) {
		firing, err := promFiring(ctx, prom)
		if err != nil {
			return false, err.Error(), nil
		}
		for a := range firing {
			if _, seen := fired[a]; !seen {
				fired[a] = time.Since(down).Round(time.Second)
			}
		}
		return firing["PolyaxonAPIUnavailable"] && firing["PolyaxonPostgresDown"], fmt.Sprintf("firing %v", firing), nil
	})
	t.Logf("gateway and Postgres scaled to 0; firing after: %v", fired)

	// Back: both alerts clear once the pods serve again.
	up := time.Now()
	scaleTo(t, c, ns, "StatefulSet", postgres, 1)
	scaleTo(t, c, ns, "Deployment", gateway, 2)
	cleared := map[string]time.Duration{}
	waitFor(t, 6*time.Minute, "both alerts cleared", func(ctx context.Context) (bool, string, error) {
		firing, err := promFiring(ctx, prom)
		if err != nil {
			return false, err.Error(), nil
		}
		for _, a := range []string{"PolyaxonAPIUnavailable", "PolyaxonPostgresDown"} {
			if _, seen := cleared[a]; !seen && !firing[a] {
				cleared[a] = time.Since(up).Round(time.Second)
			}
		}
		return len(cleared) == 2, fmt.Sprintf("firing %v", firing), nil
	})
	t.Logf("gateway and Postgres back; cleared after: %v", cleared)
	waitFor(t, 5*time.Minute, "the gateway and Postgres ready again", func(ctx context.Context) (bool, string, error) {
		d, err := c.Clientset.AppsV1().Deployments(ns).Get(ctx, gateway, metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		s, err := c.Clientset.AppsV1().StatefulSets(ns).Get(ctx, postgres, metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		return d.Status.ReadyReplicas == 2 && s.Status.ReadyReplicas == 1, strings.Join([]string{
			fmt.Sprintf("gateway %d/2", d.Status.ReadyReplicas), fmt.Sprintf("postgres %d/1", s.Status.ReadyReplicas)}, ", "), nil
	})
}
