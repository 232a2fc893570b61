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
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// peer is one end of a connection the NetworkPolicies judge: a pod (labels and namespace) or
// an address outside the cluster (no namespace).
type peer struct {
	name   string
	labels map[string]string
	ns     string
	ip     string
}

// policyJudge renders values and builds cyclonus's matcher over the NetworkPolicies: the
// Kubernetes NetworkPolicy semantics, written by SIG Network members to test CNI plugins. The
// local provider enforces no NetworkPolicy, so this is where the promises are checked.
func policyJudge(t *testing.T, layers ...map[string]any) (*matcher.Policy, rendered) {
	t.Helper()
	r := render(t, layers...)
	var policies []*networkingv1.NetworkPolicy
	for _, o := range r.byKind("NetworkPolicy") {
		var np networkingv1.NetworkPolicy
		decodeStrict(t, o, &np)
		policies = append(policies, &np)
	}
	require.NotEmpty(t, policies, "no NetworkPolicy rendered")
	return matcher.BuildNetworkPolicies(true, policies), r
}

func allowed(judge *matcher.Policy, from, to peer, port int, proto corev1.Protocol) (bool, string) {
	tp := func(p peer) *matcher.TrafficPeer {
		out := &matcher.TrafficPeer{IP: p.ip}
		if p.ns != "" {
			out.Internal = &matcher.InternalPeer{PodLabels: p.labels, Namespace: p.ns,
				NamespaceLabels: map[string]string{"kubernetes.io/metadata.name": p.ns}}
		}
		return out
	}
	got := judge.IsTrafficAllowed(&matcher.Traffic{Source: tp(from), Destination: tp(to), ResolvedPort: port, Protocol: proto})
	return got.IsAllowed(), got.Table()
}

type flow struct {
	from, to peer
	port     int
	proto    corev1.Protocol
	allowed  bool
}

func judgeFlows(t *testing.T, judge *matcher.Policy, flows []flow) {
	t.Helper()
	for _, f := range flows {
		t.Run(fmt.Sprintf("%s to %s:%d", f.from.name, f.to.name, f.port), func(t *testing.T) {
			got, table := allowed(judge, f.from, f.to, f.port, f.proto)
			assert.Equal(t, f.allowed, got, "\n%s", table)
		})
	}
}

func podLabels(t *testing.T, r rendered, component string) map[string]string {
	t.Helper()
	for _, p := range r.pods(t) {
		if p.component == component {
			return p.meta.Labels
		}
	}
	t.Fatalf("no %s pod in the render", component)
	return nil
}

// A run pod of another run: the fixture's labels with another run's uuid.
func otherRun(t *testing.T, fixture string) map[string]string {
	l := runPodLabels(t, fixture, nil)
	l["app.kubernetes.io/instance"] = "7d1e0c9b8a7f4e6d5c4b3a2918f7e6d5"
	l["operation.polyaxon.com/uuid"] = "7d1e0c9b8a7f4e6d5c4b3a2918f7e6d5"
	return l
}

// The production render: the dependencies accept only the platform's processes, the gateway
// its own namespace and the ingress controller's, and run pods only the gateway.
func TestNetworkPolicies(t *testing.T) {
	const tcp, udp = corev1.ProtocolTCP, corev1.ProtocolUDP
	// The API server's addresses, as an online render reads them from the cluster.
	api := map[string]any{"networkPolicy": map[string]any{"runs": map[string]any{"apiServerCIDRs": []any{"10.96.0.1/32", "172.18.0.2/32"}}}}
	judge, r := policyJudge(t, profileValues(t, "production"), withRabbitMQ, api)

	run := peer{"run pod", runPodLabels(t, "job.yaml", nil), testRunsNamespace, "10.0.5.1"}
	// A run that asks for every label of the platform: Polyaxon keeps its own over them.
	impostor := peer{"run pod copying the agent's labels", runPodLabels(t, "job.yaml", podLabels(t, r, "agent")), testRunsNamespace, "10.0.5.2"}
	gatewayImpostor := peer{"run pod copying the gateway's labels", runPodLabels(t, "job.yaml", podLabels(t, r, "gateway")), testRunsNamespace, "10.0.5.3"}
	notebook := peer{"notebook", runPodLabels(t, "notebook.yaml", nil), testRunsNamespace, "10.0.6.1"}
	worker0 := peer{"a distributed run's worker 0", runPodLabels(t, "experiment.yaml", nil), testRunsNamespace, "10.0.7.1"}
	worker1 := peer{"the same run's worker 1", runPodLabels(t, "experiment.yaml", nil), testRunsNamespace, "10.0.7.2"}
	otherJob := peer{"another run's job pod", otherRun(t, "job.yaml"), testRunsNamespace, "10.0.5.9"}
	otherNotebook := peer{"another run's notebook", otherRun(t, "notebook.yaml"), testRunsNamespace, "10.0.6.9"}
	gateway := peer{"gateway", podLabels(t, r, "gateway"), testNamespace, "10.0.1.1"}
	agent := peer{"agent", podLabels(t, r, "agent"), testNamespace, "10.0.1.2"}
	scheduler := peer{"scheduler", podLabels(t, r, "scheduler"), testNamespace, "10.0.1.3"}
	postgres := peer{"postgresql", podLabels(t, r, "postgresql"), testNamespace, "10.0.2.1"}
	rabbit := peer{"rabbitmq", podLabels(t, r, "rabbitmq"), testNamespace, "10.0.2.2"}
	redis := peer{"redis", podLabels(t, r, "redis"), testNamespace, "10.0.2.3"}
	other := peer{"a pod of another namespace", map[string]string{"app": "x"}, "team-b", "10.0.9.1"}
	controller := peer{"the ingress controller", map[string]string{"app": "ingress-nginx"}, "ingress-nginx", "10.0.8.1"}
	outside := peer{name: "an address outside the cluster", ip: "203.0.113.7"}
	outside6 := peer{name: "an IPv6 address outside the cluster", ip: "2001:db8::7"}
	dns := peer{"the cluster DNS", map[string]string{"k8s-app": "kube-dns"}, "kube-system", "10.96.0.10"}
	stray := peer{"a pod of the runs namespace without Polyaxon's labels", map[string]string{"app": "x"}, testRunsNamespace, "10.0.5.7"}
	metadata := peer{name: "the cloud metadata address", ip: "169.254.169.254"}
	metadata6 := peer{name: "the IPv6 cloud metadata address", ip: "fd00:ec2::254"}
	azureWire := peer{name: "Azure's wire server", ip: "168.63.129.16"}
	alibaba := peer{name: "Alibaba Cloud's metadata address", ip: "100.100.100.200"}
	gcp6 := peer{name: "GCP's IPv6 metadata address", ip: "fd20:ce::254"}
	apiService := peer{name: "the kubernetes Service", ip: "10.96.0.1"}
	apiServer := peer{name: "the API server", ip: "172.18.0.2"}

	judgeFlows(t, judge, []flow{
		// The platform. Runs reach the gateway's runs' port (8003) only: its users' port serves
		// every project's files.
		{run, gateway, 8000, tcp, false},
		{run, gateway, 8003, tcp, true},
		{impostor, gateway, 8000, tcp, false},
		{gatewayImpostor, gateway, 8000, tcp, false},
		{notebook, gateway, 8000, tcp, false},
		{worker0, gateway, 8000, tcp, false},
		{controller, gateway, 8000, tcp, true},
		{controller, gateway, 8003, tcp, false},
		{agent, gateway, 8000, tcp, true},
		{agent, gateway, 8003, tcp, true},
		{other, gateway, 8000, tcp, false},
		{other, gateway, 8003, tcp, false},
		{outside, gateway, 8000, tcp, false},
		{outside, gateway, 8003, tcp, false},
		{gateway, postgres, 5432, tcp, true},
		{scheduler, postgres, 5432, tcp, true},
		{scheduler, rabbit, 5672, tcp, true},
		{gateway, redis, 6379, tcp, true},
		{other, postgres, 5432, tcp, false},
		{outside, postgres, 5432, tcp, false},
		{gateway, postgres, 22, tcp, false},
		{outside, scheduler, 8000, tcp, false},
		{postgres, outside, 443, tcp, false},
		{postgres, dns, 53, udp, true},
		{redis, dns, 53, tcp, true},
		{agent, outside, 443, tcp, true},
		{agent, apiServer, 6443, tcp, true},
		// What a run pod reaches: DNS, the gateway, the internet; not the dependencies, the
		// platform's other processes, the metadata addresses or the API server.
		{run, dns, 53, udp, true},
		{run, dns, 53, tcp, true},
		{run, outside, 443, tcp, true},
		{stray, postgres, 5432, tcp, false},
		{stray, agent, 8000, tcp, false},
		{stray, apiServer, 6443, tcp, false},
		{stray, gateway, 8000, tcp, false},
		{stray, gateway, 8003, tcp, true},
		{agent, stray, 8000, tcp, false},
		{run, outside6, 443, tcp, true},
		{run, postgres, 5432, tcp, false},
		{run, rabbit, 5672, tcp, false},
		{run, redis, 6379, tcp, false},
		{impostor, postgres, 5432, tcp, false},
		{impostor, redis, 6379, tcp, false},
		{run, agent, 8000, tcp, false},
		{run, metadata, 80, tcp, false},
		{run, metadata6, 80, tcp, false},
		{run, azureWire, 80, tcp, false},
		{run, alibaba, 80, tcp, false},
		{run, gcp6, 80, tcp, false},
		// Issue 53: names resolve at the cluster's DNS only, though the internet is open.
		{run, outside, 53, udp, false},
		{run, outside, 53, tcp, false},
		{run, outside6, 53, udp, false},
		{run, outside, 52, udp, true},
		{run, outside, 54, udp, true},
		{run, outside, 65535, tcp, true},
		{run, apiService, 443, tcp, false},
		{run, apiServer, 6443, tcp, false},
		{worker0, apiServer, 6443, tcp, false},
		// What reaches a run pod: the gateway (notebooks, tensorboards, services through it), and
		// a distributed run's own pods.
		{gateway, notebook, 8888, tcp, true},
		{gateway, run, 8000, tcp, true},
		{other, notebook, 8888, tcp, false},
		{controller, notebook, 8888, tcp, false},
		{outside, notebook, 8888, tcp, false},
		{agent, notebook, 8888, tcp, false},
		{redis, run, 8000, tcp, false},
		{gatewayImpostor, notebook, 8888, tcp, false},
		{worker0, worker1, 29500, tcp, true},
		{worker1, worker0, 29500, tcp, true},
		{otherJob, run, 8000, tcp, false},
		{otherJob, notebook, 8888, tcp, false},
		{otherNotebook, notebook, 8888, tcp, false},
		{otherJob, worker0, 29500, tcp, false},
		{worker0, notebook, 8888, tcp, false},
		{notebook, worker0, 29500, tcp, false},
	})
}

// An install reads the API server's addresses from the cluster (the kubernetes Service and its
// EndpointSlice): run pods reach neither, with no value set.
func TestRunsNetworkPolicyReadsTheAPIServerFromTheCluster(t *testing.T) {
	svc := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Service",
		"metadata": map[string]any{"name": "kubernetes", "namespace": "default"},
		"spec":     map[string]any{"clusterIP": "10.96.0.1", "clusterIPs": []any{"10.96.0.1"}}}}
	slice := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
		"metadata":    map[string]any{"name": "kubernetes", "namespace": "default"},
		"addressType": "IPv4",
		"endpoints":   []any{map[string]any{"addresses": []any{"172.18.0.2"}}, map[string]any{"addresses": []any{"172.18.0.3"}}}}}
	cluster := clusterOf(svc, slice)
	r, err := renderWith(loadChart(t), mergeValues(profileValues(t, "production")), false, cluster)
	require.NoError(t, err)
	var policies []*networkingv1.NetworkPolicy
	for _, o := range r.byKind("NetworkPolicy") {
		var np networkingv1.NetworkPolicy
		decodeStrict(t, o, &np)
		policies = append(policies, &np)
	}
	judge := matcher.BuildNetworkPolicies(true, policies)
	job := peer{"run pod", runPodLabels(t, "job.yaml", nil), testRunsNamespace, "10.0.5.1"}
	judgeFlows(t, judge, []flow{
		{job, peer{name: "the kubernetes Service", ip: "10.96.0.1"}, 443, corev1.ProtocolTCP, false},
		{job, peer{name: "the API server", ip: "172.18.0.2"}, 6443, corev1.ProtocolTCP, false},
		{job, peer{name: "the second API server", ip: "172.18.0.3"}, 6443, corev1.ProtocolTCP, false},
		{job, peer{name: "a node next to it", ip: "172.18.0.4"}, 443, corev1.ProtocolTCP, true},
	})
}

// The runs' values: the internet closed (then only allowedCIDRs), the API server allowed, more
// addresses denied; an empty ingress selector opens the gateway to every source.
func TestNetworkPoliciesForRunsFollowValues(t *testing.T) {
	const tcp = corev1.ProtocolTCP
	runs := func(v map[string]any) map[string]any {
		v["apiServerCIDRs"] = []any{"172.18.0.2/32"}
		return map[string]any{"networkPolicy": map[string]any{"runs": v}}
	}
	job := peer{"run pod", runPodLabels(t, "job.yaml", nil), testRunsNamespace, "10.0.5.1"}
	outside := peer{name: "an address outside the cluster", ip: "203.0.113.7"}
	bucket := peer{name: "the bucket's endpoint", ip: "198.51.100.20"}
	database := peer{name: "an external database", ip: "192.0.2.15"}
	apiServer := peer{name: "the API server", ip: "172.18.0.2"}
	dns := peer{"the cluster DNS", map[string]string{"k8s-app": "kube-dns"}, "kube-system", "10.96.0.10"}

	t.Run("internet closed", func(t *testing.T) {
		judge, r := policyJudge(t, profileValues(t, "production"), runs(map[string]any{"internet": false, "allowedCIDRs": []any{"198.51.100.0/24"}}))
		gateway := peer{"gateway", podLabels(t, r, "gateway"), testNamespace, "10.0.1.1"}
		judgeFlows(t, judge, []flow{
			{job, outside, 443, tcp, false},
			{job, bucket, 443, tcp, true},
			{job, apiServer, 6443, tcp, false},
			{job, gateway, 8000, tcp, false},
			{job, gateway, 8003, tcp, true},
			{job, dns, 53, corev1.ProtocolUDP, true},
			{job, peer{name: "a nameserver outside the cluster", ip: "203.0.113.53"}, 53, corev1.ProtocolUDP, false},
			{job, peer{"a pod of kube-system that is not DNS", map[string]string{"app": "x"}, "kube-system", "10.0.3.1"}, 53, corev1.ProtocolUDP, false},
		})
	})
	t.Run("API server allowed, internet closed", func(t *testing.T) {
		judge, _ := policyJudge(t, profileValues(t, "production"), runs(map[string]any{"internet": false, "apiServer": true}))
		judgeFlows(t, judge, []flow{{job, apiServer, 6443, tcp, true}, {job, outside, 443, tcp, false}})
	})
	t.Run("API server allowed", func(t *testing.T) {
		judge, _ := policyJudge(t, profileValues(t, "production"), runs(map[string]any{"apiServer": true}))
		judgeFlows(t, judge, []flow{{job, apiServer, 6443, tcp, true}, {job, outside, 443, tcp, true}})
	})
	t.Run("an external database denied", func(t *testing.T) {
		judge, _ := policyJudge(t, profileValues(t, "production"), runs(map[string]any{"deniedCIDRs": []any{"192.0.2.0/28", "2001:db8:1::/48"}}))
		judgeFlows(t, judge, []flow{
			{job, database, 5432, tcp, false},
			{job, peer{name: "an external database (IPv6)", ip: "2001:db8:1::5"}, 5432, tcp, false},
			{job, outside, 443, tcp, true},
		})
	})
	t.Run("runs in the release's namespace", func(t *testing.T) {
		judge, r := policyJudge(t, profileValues(t, "production"), map[string]any{"runs": map[string]any{"namespace": testNamespace}})
		gateway := peer{"gateway", podLabels(t, r, "gateway"), testNamespace, "10.0.1.1"}
		agent := peer{"agent", podLabels(t, r, "agent"), testNamespace, "10.0.1.2"}
		run := peer{"run pod", runPodLabels(t, "job.yaml", nil), testNamespace, "10.0.5.1"}
		impostor := peer{"run pod copying the agent's labels", runPodLabels(t, "job.yaml", podLabels(t, r, "agent")), testNamespace, "10.0.5.2"}
		judgeFlows(t, judge, []flow{
			{run, gateway, 8000, tcp, false},
			{impostor, gateway, 8000, tcp, false},
			{run, gateway, 8003, tcp, true},
			{agent, gateway, 8000, tcp, true},
			{agent, gateway, 8003, tcp, true},
		})
		// A Gateway in the release's namespace (a parentRef without a namespace): its data
		// plane's namespace, the one runs share, is admitted to the users' port, but no run.
		judge, r = policyJudge(t, profileValues(t, "production"), map[string]any{"runs": map[string]any{"namespace": testNamespace}},
			map[string]any{"networkPolicy": map[string]any{"ingressNamespaceSelector": nil}, "edge": map[string]any{"enabled": false}},
			httpRouteValues(map[string]any{"parentRefs": []any{map[string]any{"name": "public"}}}))
		gateway = peer{"gateway", podLabels(t, r, "gateway"), testNamespace, "10.0.1.1"}
		dataPlane := peer{"the Gateway's proxy in the release's namespace", map[string]string{"app": "proxy"}, testNamespace, "10.0.1.7"}
		judgeFlows(t, judge, []flow{
			{dataPlane, gateway, 8000, tcp, true},
			{run, gateway, 8000, tcp, false},
			{impostor, gateway, 8000, tcp, false},
			{run, gateway, 8003, tcp, true},
		})
	})
	t.Run("gateway open to every source", func(t *testing.T) {
		judge, r := policyJudge(t, profileValues(t, "production"), map[string]any{"networkPolicy": map[string]any{"ingressNamespaceSelector": nil}})
		gateway := peer{"gateway", podLabels(t, r, "gateway"), testNamespace, "10.0.1.1"}
		other := peer{"a pod of another namespace", map[string]string{"app": "x"}, "team-b", "10.0.9.1"}
		notebook := peer{"notebook", runPodLabels(t, "notebook.yaml", nil), testRunsNamespace, "10.0.6.1"}
		judgeFlows(t, judge, []flow{
			{other, gateway, 8000, tcp, true},
			{outside, gateway, 8000, tcp, true},
			{other, gateway, 8003, tcp, true},
			{job, gateway, 8003, tcp, true},
			{other, notebook, 8888, tcp, false},
		})
	})
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
