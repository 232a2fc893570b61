package charts_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/mattfenwick/cyclonus/pkg/matcher"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"sigs.k8s.io/yaml"
)

// The rendered NetworkPolicies, judged with the Kubernetes NetworkPolicy semantics (cyclonus's
// matcher, written by SIG Network members to test CNI plugins): the local provider enforces no
// NetworkPolicy, so this is where the promises are checked.
func TestNetworkPolicies(t *testing.T) {
	type peer struct {
		name   string
		labels map[string]string
		ns     string
		ip     string
	}
	r := render(t, profileValues(t, "production"), withRabbitMQ)
	var policies []*networkingv1.NetworkPolicy
	for _, o := range r.byKind("NetworkPolicy") {
		var np networkingv1.NetworkPolicy
		decodeStrict(t, o, &np)
		policies = append(policies, &np)
	}
	require.NotEmpty(t, policies, "the production profile turns NetworkPolicies on")
	podLabels := func(component string) map[string]string {
		for _, p := range r.pods(t) {
			if p.component == component {
				return p.meta.Labels
			}
		}
		t.Fatalf("no %s pod in the render", component)
		return nil
	}
	run := peer{"run pod", runPodLabels(t, "job.yaml", nil), testNamespace, "10.0.5.1"}
	// A run that asks for every label of the platform: Polyaxon keeps its own over them.
	impostor := peer{"run pod copying the agent's labels", runPodLabels(t, "job.yaml", podLabels("agent")), testNamespace, "10.0.5.2"}
	gateway := peer{"gateway", podLabels("gateway"), testNamespace, "10.0.1.1"}
	agent := peer{"agent", podLabels("agent"), testNamespace, "10.0.1.2"}
	scheduler := peer{"scheduler", podLabels("scheduler"), testNamespace, "10.0.1.3"}
	postgres := peer{"postgresql", podLabels("postgresql"), testNamespace, "10.0.2.1"}
	rabbit := peer{"rabbitmq", podLabels("rabbitmq"), testNamespace, "10.0.2.2"}
	redis := peer{"redis", podLabels("redis"), testNamespace, "10.0.2.3"}
	other := peer{"a pod of another namespace", map[string]string{"app": "x"}, "team-b", "10.0.9.1"}
	outside := peer{name: "an address outside the cluster", ip: "203.0.113.7"}
	dns := peer{name: "the cluster DNS", ip: "10.96.0.10"}

	cases := []struct {
		from, to peer
		port     int
		proto    corev1.Protocol
		allowed  bool
	}{
		{run, gateway, 8000, corev1.ProtocolTCP, true},
		{outside, gateway, 8000, corev1.ProtocolTCP, true},
		{other, gateway, 8000, corev1.ProtocolTCP, true},
		{agent, gateway, 8000, corev1.ProtocolTCP, true},
		{gateway, postgres, 5432, corev1.ProtocolTCP, true},
		{scheduler, postgres, 5432, corev1.ProtocolTCP, true},
		{scheduler, rabbit, 5672, corev1.ProtocolTCP, true},
		{gateway, redis, 6379, corev1.ProtocolTCP, true},
		{run, postgres, 5432, corev1.ProtocolTCP, false},
		{run, rabbit, 5672, corev1.ProtocolTCP, false},
		{run, redis, 6379, corev1.ProtocolTCP, false},
		{impostor, postgres, 5432, corev1.ProtocolTCP, false},
		{impostor, redis, 6379, corev1.ProtocolTCP, false},
		{other, postgres, 5432, corev1.ProtocolTCP, false},
		{outside, postgres, 5432, corev1.ProtocolTCP, false},
		{gateway, postgres, 22, corev1.ProtocolTCP, false},
		{run, agent, 8000, corev1.ProtocolTCP, false},
		{outside, scheduler, 8000, corev1.ProtocolTCP, false},
		{postgres, outside, 443, corev1.ProtocolTCP, false},
		{redis, run, 8000, corev1.ProtocolTCP, false},
		{postgres, dns, 53, corev1.ProtocolUDP, true},
		{redis, dns, 53, corev1.ProtocolTCP, true},
		{agent, outside, 443, corev1.ProtocolTCP, true},
		{gateway, run, 8888, corev1.ProtocolTCP, true},
	}
	judge := matcher.BuildNetworkPolicies(true, policies)
	traffic := func(from, to peer, port int, proto corev1.Protocol) *matcher.Traffic {
		tp := func(p peer) *matcher.TrafficPeer {
			out := &matcher.TrafficPeer{IP: p.ip}
			if p.ns != "" {
				out.Internal = &matcher.InternalPeer{PodLabels: p.labels, Namespace: p.ns,
					NamespaceLabels: map[string]string{"kubernetes.io/metadata.name": p.ns}}
			}
			return out
		}
		return &matcher.Traffic{Source: tp(from), Destination: tp(to), ResolvedPort: port, Protocol: proto}
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%s to %s:%d", tc.from.name, tc.to.name, tc.port), func(t *testing.T) {
			got := judge.IsTrafficAllowed(traffic(tc.from, tc.to, tc.port, tc.proto))
			assert.Equal(t, tc.allowed, got.IsAllowed(), "\n%s", got.Table())
		})
	}

	// With the ingress controller's namespace named, only it (and this namespace) reach the gateway.
	r = render(t, profileValues(t, "production"), map[string]any{"networkPolicy": map[string]any{"ingressNamespaceSelector": map[string]any{"kubernetes.io/metadata.name": "ingress-nginx"}}})
	policies = nil
	for _, o := range r.byKind("NetworkPolicy") {
		var np networkingv1.NetworkPolicy
		decodeStrict(t, o, &np)
		policies = append(policies, &np)
	}
	judge = matcher.BuildNetworkPolicies(true, policies)
	controller := peer{"the ingress controller", map[string]string{"app": "ingress-nginx"}, "ingress-nginx", "10.0.8.1"}
	assert.True(t, judge.IsTrafficAllowed(traffic(controller, gateway, 8000, corev1.ProtocolTCP)).IsAllowed())
	assert.True(t, judge.IsTrafficAllowed(traffic(run, gateway, 8000, corev1.ProtocolTCP)).IsAllowed())
	assert.False(t, judge.IsTrafficAllowed(traffic(other, gateway, 8000, corev1.ProtocolTCP)).IsAllowed())
	assert.False(t, judge.IsTrafficAllowed(traffic(outside, gateway, 8000, corev1.ProtocolTCP)).IsAllowed())
}

// runPodLabels: the labels of a run pod fixture (e2e/testdata/runpods) as Polyaxon gives them,
// after the run asked for `asked` in its environment.labels: Polyaxon applies the run's labels
// first and its own recommended labels over them (cli `_k8s/converter/base/base.py`).
func runPodLabels(t *testing.T, fixture string, asked map[string]string) map[string]string {
	t.Helper()
	var pod corev1.Pod
	raw := readFile(t, "../e2e/testdata/runpods/"+fixture)
	require.NoError(t, yaml.Unmarshal(raw, &pod))
	out := map[string]string{}
	for k, v := range asked {
		out[k] = v
	}
	for k, v := range pod.Labels {
		out[k] = v
	}
	return out
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	return raw
}
