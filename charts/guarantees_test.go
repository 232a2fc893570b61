package charts_test

// Guarantees of the chart written as checks of a loaded chart, so that they run twice: on the
// chart as it is (each must pass), and on copies of it with a hand-written mutation applied
// (each mutation must make its check fail: TestChartMutationsAreCaught). A check that passes
// on a broken chart protects nothing.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/mattfenwick/cyclonus/pkg/matcher"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	runtimepkg "k8s.io/apimachinery/pkg/runtime"
	psaapi "k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"
	"sigs.k8s.io/yaml"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/admission"
)

// chartCheck asserts a guarantee of ch.
type chartCheck func(t testing.TB, ch *chart.Chart)

func renderChart(t testing.TB, ch *chart.Chart, layers ...map[string]any) rendered {
	t.Helper()
	r, err := renderWith(ch, mergeValues(layers...), false, nil)
	require.NoError(t, err)
	return r
}

// ---------------------------------------------------------------- scheduling: component beats category

// The hook Jobs take the core category only (they have no scheduling keys of their own); every
// other core component is a Deployment with its own keys (files/components.yaml).
var (
	coreJobs             = []string{"migrations", "admin-user", "backup"}
	coreDeployments      = without(components.Core, coreJobs)
	dependencyComponents = components.Dependencies
)

func without(list, drop []string) []string {
	var out []string
	for _, s := range list {
		if !contains(drop, s) {
			out = append(out, s)
		}
	}
	return out
}

func tol(key string) map[string]any {
	return map[string]any{"key": key, "operator": "Exists", "effect": "NoSchedule"}
}

// requiredZone is a required node affinity on label zone In [zone].
func requiredZone(zone string) map[string]any {
	return map[string]any{"requiredDuringSchedulingIgnoredDuringExecution": map[string]any{
		"nodeSelectorTerms": []any{map[string]any{"matchExpressions": []any{
			map[string]any{"key": "zone", "operator": "In", "values": []any{zone}}}}}}}
}

// clashValues: the core category and every component set the same keys with different values,
// and each has keys of its own.
func clashValues() map[string]any {
	v := mergeValues(everything, map[string]any{
		"auth":          map[string]any{"enabled": true},
		"nodeSelectors": map[string]any{"core": map[string]any{"pool": "core", "disk": "hdd"}},
		"tolerations":   map[string]any{"core": []any{tol("core-only")}},
		"affinity": map[string]any{"core": map[string]any{"nodeAffinity": mergeValues(requiredZone("category"), map[string]any{
			"preferredDuringSchedulingIgnoredDuringExecution": []any{map[string]any{"weight": 1,
				"preference": map[string]any{"matchExpressions": []any{map[string]any{"key": "category-preferred", "operator": "Exists"}}}}}})}},
	})
	for _, c := range append(append([]string{}, coreDeployments...), dependencyComponents...) {
		own, _ := v[c].(map[string]any)
		v[c] = mergeValues(own, map[string]any{
			"nodeSelector": map[string]any{"disk": "ssd-" + c, "owner": c},
			"tolerations":  []any{tol(c + "-only")},
			"affinity":     map[string]any{"nodeAffinity": requiredZone(c)},
		})
	}
	return v
}

func zoneOf(a *corev1.Affinity) string {
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return ""
	}
	return strings.Join(a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchExpressions[0].Values, ",")
}

func tolerationKeys(ts []corev1.Toleration) []string {
	var out []string
	for _, t := range ts {
		out = append(out, t.Key)
	}
	return out
}

// checkComponentBeatsCategory: for nodeSelector, tolerations and affinity, on every pod, a
// component's own value wins over the core category's where both set a key, the category's
// other keys stay, no component's keys reach another pod, and dependencies take only theirs.
func checkComponentBeatsCategory(t testing.TB, ch *chart.Chart) {
	r := renderChart(t, ch, clashValues())
	seen := map[string]bool{}
	for _, p := range r.pods(t) {
		c := p.component
		seen[c] = true
		where := fmt.Sprintf("%s %s (component %s)", p.kind, p.name, c)
		switch {
		case contains(coreDeployments, c):
			assert.Equal(t, map[string]string{"pool": "core", "disk": "ssd-" + c, "owner": c}, p.spec.NodeSelector, "nodeSelector of %s", where)
			assert.Equal(t, []string{c + "-only"}, tolerationKeys(p.spec.Tolerations), "tolerations of %s: the component's list replaces the category's", where)
			assert.Equal(t, c, zoneOf(p.spec.Affinity), "required node affinity of %s", where)
			if assert.NotNil(t, p.spec.Affinity, where) && assert.NotNil(t, p.spec.Affinity.NodeAffinity, where) {
				assert.Len(t, p.spec.Affinity.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution, 1,
					"%s keeps the category's preferred node affinity (merged key by key, not replaced)", where)
			}
			if c != "gateway" { // a spread gateway leaves the core co-location out
				assert.NotNil(t, p.spec.Affinity.PodAffinity, "%s keeps the category's pod affinity", where)
			}
		case contains(coreJobs, c):
			assert.Equal(t, map[string]string{"pool": "core", "disk": "hdd"}, p.spec.NodeSelector, "nodeSelector of %s", where)
			assert.Equal(t, []string{"core-only"}, tolerationKeys(p.spec.Tolerations), "tolerations of %s", where)
			assert.Equal(t, "category", zoneOf(p.spec.Affinity), "required node affinity of %s", where)
		case contains(dependencyComponents, c):
			assert.Equal(t, map[string]string{"disk": "ssd-" + c, "owner": c}, p.spec.NodeSelector, "nodeSelector of %s: its own keys only", where)
			assert.Equal(t, []string{c + "-only"}, tolerationKeys(p.spec.Tolerations), "tolerations of %s", where)
			assert.Equal(t, c, zoneOf(p.spec.Affinity), "affinity of %s", where)
			if p.spec.Affinity != nil {
				assert.Nil(t, p.spec.Affinity.PodAffinity, "%s inherited the core pod affinity", where)
			}
		default:
			t.Errorf("%s: a component this check does not know; add it", where)
		}
	}
	for _, c := range append(append(append([]string{}, coreDeployments...), coreJobs...), dependencyComponents...) {
		assert.True(t, seen[c], "no pod of %s in the render", c)
	}
}

func TestComponentBeatsCategoryKeyByKey(t *testing.T) { checkComponentBeatsCategory(t, loadChart(t)) }

// ---------------------------------------------------------------- run pods hardened by the API server

// runPodFixtures are run pods as Polyaxon creates them (e2e/testdata/runpods): no securityContext.
var runPodFixtures = []string{"job.yaml", "experiment.yaml", "build.yaml", "notebook.yaml", "tensorboard.yaml"}

// typedObjects converts the rendered objects the admission code reads into their types.
func typedObjects(t testing.TB, r rendered) []runtimepkg.Object {
	t.Helper()
	var out []runtimepkg.Object
	for _, o := range r.objects {
		var typed runtimepkg.Object
		switch o.GetKind() {
		case "MutatingAdmissionPolicy":
			typed = &admissionregistrationv1.MutatingAdmissionPolicy{}
		case "MutatingAdmissionPolicyBinding":
			typed = &admissionregistrationv1.MutatingAdmissionPolicyBinding{}
		case "ValidatingAdmissionPolicy":
			typed = &admissionregistrationv1.ValidatingAdmissionPolicy{}
		case "ValidatingAdmissionPolicyBinding":
			typed = &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
		default:
			continue
		}
		decodeStrict(t, o, typed)
		out = append(out, typed)
	}
	return out
}

// checkRunPodsHardened: the release's admission policies, evaluated with the API server's
// code, leave every kind of run pod within the restricted Pod Security level (which the pod as
// Polyaxon writes it is not).
func checkRunPodsHardened(t testing.TB, ch *chart.Chart) {
	r := renderChart(t, ch, profileValues(t, "production"))
	ev, err := admission.New(admission.Policies(typedObjects(t, r)))
	require.NoError(t, err)
	psa, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	require.NoError(t, err)
	lv := psaapi.LevelVersion{Level: psaapi.LevelRestricted, Version: psaapi.LatestVersion()}
	for _, f := range runPodFixtures {
		var pod corev1.Pod
		require.NoError(t, yaml.UnmarshalStrict(runPodFixture(t, f), &pod), f)
		pod.Namespace = testRunsNamespace
		before := policy.AggregateCheckResults(psa.EvaluatePod(lv, &pod.ObjectMeta, &pod.Spec))
		require.False(t, before.Allowed, "fixture %s is already restricted: it proves nothing", f)
		got, err := ev.MutatePod(context.Background(), &pod)
		require.NoError(t, err, f)
		res := policy.AggregateCheckResults(psa.EvaluatePod(lv, &got.ObjectMeta, &got.Spec))
		assert.True(t, res.Allowed, "run pod %s after the release's policies: %s", f, res.ForbiddenDetail())
	}
}

func TestRunPodsAreHardenedByTheSecurityPolicy(t *testing.T) { checkRunPodsHardened(t, loadChart(t)) }

// ---------------------------------------------------------------- the databases only for the platform

// checkDependenciesOnlyForThePlatform: with the production profile's NetworkPolicies, the
// gateway reaches Postgres, RabbitMQ and Redis and a run pod (even one asking for the agent's
// labels) reaches none of them.
func checkDependenciesOnlyForThePlatform(t testing.TB, ch *chart.Chart) {
	r := renderChart(t, ch, profileValues(t, "production"), withRabbitMQ)
	var policies []*networkingv1.NetworkPolicy
	for _, o := range r.byKind("NetworkPolicy") {
		var np networkingv1.NetworkPolicy
		decodeStrict(t, o, &np)
		policies = append(policies, &np)
	}
	require.NotEmpty(t, policies)
	labels := map[string]map[string]string{}
	for _, p := range r.pods(t) {
		labels[p.component] = p.meta.Labels
	}
	judge := matcher.BuildNetworkPolicies(true, policies)
	peer := func(l map[string]string, ip string) *matcher.TrafficPeer {
		return &matcher.TrafficPeer{IP: ip, Internal: &matcher.InternalPeer{PodLabels: l, Namespace: testNamespace,
			NamespaceLabels: map[string]string{"kubernetes.io/metadata.name": testNamespace}}}
	}
	clients := map[string]map[string]string{
		"gateway":  labels["gateway"],
		"run pod":  runPodLabelsAsking(t, nil),
		"impostor": runPodLabelsAsking(t, labels["agent"]),
	}
	for dep, port := range map[string]int{"postgresql": 5432, "rabbitmq": 5672, "redis": 6379} {
		require.NotNil(t, labels[dep], "no %s pod", dep)
		for name, l := range clients {
			got := judge.IsTrafficAllowed(&matcher.Traffic{Source: peer(l, "10.0.5.1"), Destination: peer(labels[dep], "10.0.2.1"),
				ResolvedPort: port, Protocol: corev1.ProtocolTCP})
			assert.Equal(t, name == "gateway", got.IsAllowed(), "%s to %s:%d\n%s", name, dep, port, got.Table())
		}
	}
}

// runPodFixture reads a run pod of e2e/testdata/runpods.
func runPodFixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "e2e", "testdata", "runpods", name))
	require.NoError(t, err)
	return b
}

// runPodLabelsAsking: a job run pod's labels after the run asked for asked (Polyaxon's own
// labels are applied over the run's).
func runPodLabelsAsking(t testing.TB, asked map[string]string) map[string]string {
	t.Helper()
	var pod corev1.Pod
	require.NoError(t, yaml.Unmarshal(runPodFixture(t, "job.yaml"), &pod))
	out := map[string]string{}
	for k, v := range asked {
		out[k] = v
	}
	for k, v := range pod.Labels {
		out[k] = v
	}
	return out
}

func TestDependenciesOnlyForThePlatform(t *testing.T) {
	checkDependenciesOnlyForThePlatform(t, loadChart(t))
}

// ---------------------------------------------------------------- the artifacts store mounted

// checkArtifactsStoreMounted: with a volume store (the production profile's claim), the gateway
// mounts the claim at the path the agent tells runs to use.
func checkArtifactsStoreMounted(t testing.TB, ch *chart.Chart) {
	r := renderChart(t, ch, profileValues(t, "production"))
	mountPath, _ := chartValue(ch, "artifactsStore", "mountPath").(string)
	require.NotEmpty(t, mountPath)
	found := false
	for _, p := range r.pods(t) {
		if p.component != "gateway" {
			continue
		}
		found = true
		claim := ""
		for _, v := range p.spec.Volumes {
			if v.PersistentVolumeClaim != nil && v.Name == "artifacts-store" {
				claim = v.PersistentVolumeClaim.ClaimName
			}
		}
		assert.Equal(t, "polyaxon-artifacts", claim, "the gateway's artifacts volume")
		// The API writes to the store (uploads, collected logs); streams only reads it; nginx,
		// in front, never sees it.
		mounts := map[string]string{}
		for _, c := range p.spec.Containers {
			for _, m := range c.VolumeMounts {
				if m.Name == "artifacts-store" {
					mounts[c.Name] = fmt.Sprintf("%s ro=%v", m.MountPath, m.ReadOnly)
				}
			}
		}
		assert.Equal(t, map[string]string{"gateway": mountPath + " ro=false", "streams": mountPath + " ro=true"}, mounts,
			"the gateway's API and streams mount the artifacts store where runs write, streams read-only")
	}
	assert.True(t, found, "no gateway pod")
	assert.Contains(t, agentConfig(t, r)["POLYAXON_AGENT_ARTIFACTS_STORE"], mountPath, "the agent gives runs the same path")
}

func chartValue(ch *chart.Chart, path ...string) any {
	var v any = ch.Values
	for _, k := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

func TestArtifactsStoreMountedInTheGateway(t *testing.T) { checkArtifactsStoreMounted(t, loadChart(t)) }

// ---------------------------------------------------------------- mutations

// chartMutation replaces old (which must occur) by new in a file of a copy of the chart.
type chartMutation struct {
	name, file, old, new string
	check                chartCheck
}

var chartMutations = []chartMutation{
	{"the category beats the component for nodeSelector (mergeOverwrite arguments swapped)", "templates/_scheduling.tpl",
		`mergeOverwrite $nodeSelector (deepCopy ($c.nodeSelector | default dict))`,
		`mergeOverwrite (deepCopy ($c.nodeSelector | default dict)) $nodeSelector`, checkComponentBeatsCategory},
	{"the category beats the component for affinity (mergeOverwrite arguments swapped)", "templates/_scheduling.tpl",
		`mergeOverwrite $affinity (deepCopy ($c.affinity | default dict))`,
		`mergeOverwrite (deepCopy ($c.affinity | default dict)) $affinity`, checkComponentBeatsCategory},
	{"a component's tolerations are added to the category's instead of replacing them", "templates/_scheduling.tpl",
		`{{- $tolerations = $c.tolerations -}}`, `{{- $tolerations = concat $tolerations $c.tolerations -}}`, checkComponentBeatsCategory},
	{"the category's affinity is replaced, not merged key by key", "templates/_scheduling.tpl",
		`{{- $affinity = mergeOverwrite $affinity (deepCopy ($c.affinity | default dict)) -}}`,
		`{{- if $c.affinity }}{{ $affinity = deepCopy $c.affinity }}{{ end -}}`, checkComponentBeatsCategory},
	{"the security policy no longer forbids privilege escalation", "templates/runs/mutatingadmissionpolicy.yaml",
		`?allowPrivilegeEscalation: c.?securityContext.?allowPrivilegeEscalation.hasValue() || c.?securityContext.?privileged.orValue(false) ? optional.none() : optional.of(false)}}),`,
		`?allowPrivilegeEscalation: optional.none()}}),`, checkRunPodsHardened},
	{"the security policy no longer sets runAsNonRoot", "templates/runs/mutatingadmissionpolicy.yaml",
		`?runAsNonRoot: object.spec.?securityContext.?runAsNonRoot.hasValue() ? optional.none() : optional.of(true),`, ``, checkRunPodsHardened},
	{"the security policy no longer sets the seccomp profile", "templates/runs/mutatingadmissionpolicy.yaml",
		`: optional.of(Object.spec.securityContext.seccompProfile{type: "RuntimeDefault"})`, `: optional.none()`, checkRunPodsHardened},
	{"the dependencies' NetworkPolicy admits every pod of the namespace", "templates/_dependency.tpl",
		"    - podSelector:\n        {{- include \"polyaxon.networkPolicy.platformPods\" .ctx | nindent 8 }}",
		"    - podSelector: {}", checkDependenciesOnlyForThePlatform},
	{"the runs' restrictions no longer keep runs off the protected pools", "templates/runs/validatingadmissionpolicy.yaml",
		`- expression: 'variables.unconfined.size() == 0'`, `- expression: 'true'`, checkRunsKeptOffProtectedPools},
	{"a nodeSelector on any label keeps a run off the protected pools (a hostname passes)", "templates/runs/validatingadmissionpolicy.yaml",
		`!variables.nodeSelector.exists(k, k in p.labels && variables.nodeSelector[k] != p.labels[k])`,
		`!variables.nodeSelector.exists(k, !(k in p.labels) || variables.nodeSelector[k] != p.labels[k])`, checkRunsKeptOffProtectedPools},
	{"one required affinity term that keeps off the protected pools is enough", "templates/runs/validatingadmissionpolicy.yaml",
		`|| variables.terms.exists(t, !t.?matchExpressions`, `|| variables.terms.all(t, !t.?matchExpressions`, checkRunsKeptOffProtectedPools},
	{"the gateway's API no longer mounts the artifacts store", "templates/gateway/deployment.yaml",
		`{{- with include "polyaxon.artifactsStore.volumeMounts" (dict "ctx" .) }}{{ . | trim | nindent 10 }}{{ end }}`, ``, checkArtifactsStoreMounted},
	{"streams mounts the artifacts store read-write", "templates/gateway/deployment.yaml",
		`(dict "ctx" . "readOnly" true)`, `(dict "ctx" .)`, checkArtifactsStoreMounted},
	{"streams gets the platform's passwords and keys", "templates/gateway/deployment.yaml",
		"        - name: POLYAXON_SERVICE\n          value: streams", "        {{- include \"polyaxon.env.platform\" . | nindent 8 }}\n        - name: POLYAXON_SERVICE\n          value: streams", checkStreamsHoldsNoPlatformSecret},
	{"haupt starts without its link guard", "files/store-guard.py",
		"\ninstall_from_env()\n", "\n", checkStreamsHoldsNoPlatformSecret},
	{"nginx no longer refuses other spellings of a path", "templates/gateway/_proxy.tpl",
		"if ($polyaxon_refused_path) {\n    return 400;\n}\n", "", checkGatewayProxyConfig},
	{"runs are served every project's files", "templates/gateway/_proxy.tpl",
		"        {{- if .Values.runs.artifactsOfOtherRuns }}\n        {{- include \"polyaxon.gateway.proxyStreams\" . | nindent 8 }}\n        {{- end }}\n",
		"        {{- include \"polyaxon.gateway.proxyStreams\" . | nindent 8 }}\n", checkGatewayProxyConfig},
	{"runs reach every route of the API's container", "templates/gateway/_proxy.tpl",
		"            return 403 \"Runs reach the API only", "            proxy_pass http://polyaxon_api;\n            return 403 \"Runs reach the API only", checkGatewayProxyConfig},
	{"nginx forwards the auth request to haupt", "templates/gateway/_proxy.tpl",
		"        location /auth-request/ {\n            return 404;\n        }\n", "", checkGatewayProxyConfig},
	{"nginx stops as soon as its pod is deleted", "templates/gateway/deployment.yaml",
		"        command: [\"nginx\", \"-e\", \"stderr\", \"-c\", \"/etc/polyaxon/proxy/nginx.conf\"]\n        {{- with include \"polyaxon.drain\" (dict \"seconds\" .Values.gateway.drainSeconds) }}{{ . | trim | nindent 8 }}{{ end }}\n",
		"        command: [\"nginx\", \"-e\", \"stderr\", \"-c\", \"/etc/polyaxon/proxy/nginx.conf\"]\n", checkServingPodsDrain},
}

// mutatedChart copies charts/polyaxon to a temporary directory, applies m and loads the copy.
func mutatedChart(t *testing.T, m chartMutation) *chart.Chart {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "polyaxon")
	require.NoError(t, os.CopyFS(dir, os.DirFS("polyaxon")))
	p := filepath.Join(dir, m.file)
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	require.Truef(t, strings.Contains(string(b), m.old),
		"mutation %q no longer applies: %s has no %q (the chart changed: update the mutation to the new code)", m.name, m.file, m.old)
	require.NoError(t, os.WriteFile(p, []byte(strings.Replace(string(b), m.old, m.new, 1)), 0o644))
	ch, err := loader.Load(dir)
	require.NoError(t, err)
	return ch
}

// recorder is a testing.TB that records failures instead of failing the test it wraps.
type recorder struct {
	testing.TB
	mu     sync.Mutex
	failed bool
	msgs   []string
}

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failed = true
	r.msgs = append(r.msgs, fmt.Sprintf(format, args...))
}
func (r *recorder) Error(args ...any)                 { r.Errorf("%s", fmt.Sprint(args...)) }
func (r *recorder) Fail()                             { r.Errorf("failed") }
func (r *recorder) FailNow()                          { r.Fail(); runtime.Goexit() }
func (r *recorder) Fatalf(format string, args ...any) { r.Errorf(format, args...); runtime.Goexit() }
func (r *recorder) Fatal(args ...any)                 { r.Error(args...); runtime.Goexit() }
func (r *recorder) Failed() bool                      { r.mu.Lock(); defer r.mu.Unlock(); return r.failed }
func (r *recorder) Log(args ...any)                   {}
func (r *recorder) Logf(string, ...any)               {}

// runCheck runs check on ch with a recorder and reports what it recorded.
func runCheck(t *testing.T, check chartCheck, ch *chart.Chart) *recorder {
	rec := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		check(rec, ch)
	}()
	<-done
	return rec
}

// TestChartMutationsAreCaught: each hand-written mutation of the chart makes the check that
// guards it fail (run in process on a mutated copy).
func TestChartMutationsAreCaught(t *testing.T) {
	for _, m := range chartMutations {
		t.Run(m.name, func(t *testing.T) {
			rec := runCheck(t, m.check, mutatedChart(t, m))
			require.Truef(t, rec.Failed(), "the mutation %q (%s) passed its check: the check does not guard it", m.name, m.file)
			t.Logf("caught: %s", condensed(rec.msgs[0]))
		})
	}
}

// condensed keeps the Error and Messages lines of a testify failure.
func condensed(msg string) string {
	var keep []string
	for _, l := range strings.Split(msg, "\n") {
		l = strings.TrimSpace(l)
		if strings.HasPrefix(l, "Error:") || strings.HasPrefix(l, "Messages:") {
			keep = append(keep, l)
		}
	}
	if len(keep) == 0 {
		return msg
	}
	return strings.Join(keep, " ")
}
