package local

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// HostRewrite is one thing a process on this machine cannot have as a container has it, and
// what it gets instead. HostRewrites is every such rewrite; nothing else of the container's
// environment is changed. The README prints this table (a test keeps them equal).
type HostRewrite struct{ Container, Host, Why string }

// HostRewrites is the table of rewrites, in the order they are applied.
var HostRewrites = []HostRewrite{
	{"a Service's DNS name (`svc`, `svc.ns`, `svc.ns.svc[.cluster.local]`) in a variable, with its port (`svc:port`, a URL, or the `_PORT` variable beside a `_HOST` one)",
		"`127.0.0.1:<port>` of a loopback listener that forwards to a Ready endpoint of the Service (its EndpointSlices)",
		"no cluster DNS or Service network on this machine; readiness still decides who gets traffic"},
	{"the in-cluster API config: the ServiceAccount token mount and `KUBERNETES_SERVICE_HOST`",
		"`KUBECONFIG=<pod dir>/kubeconfig`: the API server's address and a token of the pod's own ServiceAccount (TokenRequest, bound to the pod)",
		"the process acts with exactly the rights the chart gives that ServiceAccount"},
	{"`POLYAXON_K8S_IN_CLUSTER=true`",
		"`false`",
		"Polyaxon then loads `KUBECONFIG` instead of the in-cluster files"},
	{"the image's nginx serving `/static/` (the web UI's scripts and styles, from haupt's package) in front of the API",
		"haupt serves them itself: `POLYAXON_UI_IN_SANDBOX=true` adds WhiteNoise (haupt's `sandbox` extra) to the API",
		"the chart's nginx (the proxy container, run here) sends `/static/` to the API, which then serves the whole web UI"},
	{"a port of another container of the pod, on the pod's loopback (`127.0.0.1:<port>`), and nginx's `listen <port>`, in nginx's config",
		"the loopback port here that stands for that container port; the config's mount paths are the mounts' directories here (`HostNginx`)",
		"a pod's containers share one network namespace; here every pod shares this machine's loopback"},
	{"the web UI's libraries (React, Plotly, Vega, ...) loaded from public CDNs (unpkg, cdnjs, jsDelivr), Polyaxon's default",
		"`POLYAXON_UI_OFFLINE=true`: from `/static/vendors/` in haupt's package",
		"the tests run without network"},
	{"a volume's mount path, in a variable's value",
		"`<pod dir>/volumes/<volume>[/<subPath>]`: an emptyDir is a fresh directory, a ConfigMap, Secret or projected volume its files, a claim the bound volume's own directory (shared, as the volume is), a hostPath that path of this machine (the node's own directory, as on a node)",
		"the image's paths do not exist on this machine, and pods must not share them"},
	{"the paths Polyaxon's sidecar reads a run's files under, `/plx-context/artifacts` (fixed in Polyaxon's code unless `POLYAXON_CONTEXT_ROOT` says otherwise)",
		"`POLYAXON_CONTEXT_ROOT=<pod dir>/home/plx-context`, whose `artifacts` is a link to that volume's directory here",
		"the container's path does not exist on this machine"},
	{"the sidecar's in-cluster config: kubernetes_asyncio reads `/var/run/secrets/kubernetes.io/serviceaccount/token` and `ca.crt` and `KUBERNETES_SERVICE_HOST`/`_PORT`, whatever `POLYAXON_K8S_IN_CLUSTER` says",
		"the same files of the pod's token mount here, given to the loader by the sidecar's start (`python -c <sidecar>`), and the API server's address in `KUBERNETES_SERVICE_HOST`/`_PORT`",
		"the sidecar reads its own pod through the API with the pod's ServiceAccount, as in a container"},
	{"`HOME` (the image's user)",
		"`<pod dir>/home`",
		"Polyaxon keeps state under `~/.polyaxon`; each pod gets its own"},
	{"the container's listening port",
		"a free loopback port for each container port of the pod, given to the program's command (haupt's `<host> <port>` arguments)",
		"several replicas of one image run side by side"},
	{"Service links (`<SVC>_SERVICE_HOST`, `_PORT`) and `KUBERNETES_SERVICE_*`",
		"not set",
		"their cluster IPs are not reachable from this machine"},
}

// rewriter applies the rewrites to one container's environment and records each change.
type rewriter struct {
	// services resolves a Service port of the pod's namespace or another to a loopback address.
	services map[string]serviceNames // by every DNS name a pod can use for it
	address  func(ns, svc string, port int32) (string, error)
	// mounts maps the container's mount paths to directories here, longest first.
	mounts [][2]string
	log    []string
}

type serviceNames struct {
	namespace, name string
	ports           []int32
}

// newRewriter knows the Services a pod in namespace may name, and where its mounts are here.
func newRewriter(namespace string, services []corev1.Service, address func(ns, svc string, port int32) (string, error), mounts map[string]string) *rewriter {
	r := &rewriter{services: map[string]serviceNames{}, address: address}
	for _, s := range services {
		sn := serviceNames{namespace: s.Namespace, name: s.Name}
		for _, p := range s.Spec.Ports {
			sn.ports = append(sn.ports, p.Port)
		}
		names := []string{s.Name + "." + s.Namespace, s.Name + "." + s.Namespace + ".svc", s.Name + "." + s.Namespace + ".svc.cluster.local"}
		if s.Namespace == namespace {
			names = append(names, s.Name)
		}
		for _, n := range names {
			r.services[n] = sn
		}
	}
	for path, dir := range mounts {
		r.mounts = append(r.mounts, [2]string{strings.TrimRight(path, "/"), dir})
	}
	sort.Slice(r.mounts, func(i, j int) bool { return len(r.mounts[i][0]) > len(r.mounts[j][0]) })
	return r
}

// hostPortRE finds a host, with an optional port, where a host can stand: at the start, after
// `//` or `@`, and ending before `:`, `/`, `"` or the end.
var hostPortRE = regexp.MustCompile(`(^|//|@|")([a-z0-9]([-a-z0-9.]*[a-z0-9])?)(:([0-9]+))?($|[/"?,;])`)

// apply rewrites env in place.
func (r *rewriter) apply(env []EnvVar) ([]EnvVar, error) {
	// Separate host and port variables: PREFIX_HOST names a Service, PREFIX_PORT its port.
	hostOf := map[string]serviceNames{}
	for i, e := range env {
		if prefix, ok := strings.CutSuffix(e.Name, "_HOST"); ok {
			if s, ok := r.services[e.Value]; ok {
				hostOf[prefix] = s
				env[i].Value = "127.0.0.1"
				r.note(e.Name, e.Value, env[i].Value)
			}
		}
	}
	for i, e := range env {
		prefix, ok := strings.CutSuffix(e.Name, "_PORT")
		if !ok {
			continue
		}
		s, ok := hostOf[prefix]
		if !ok {
			continue
		}
		port, err := strconv.Atoi(e.Value)
		if err != nil || !hasPort(s, int32(port)) {
			continue
		}
		addr, err := r.address(s.namespace, s.name, int32(port))
		if err != nil {
			return nil, err
		}
		env[i].Value = addr[strings.LastIndexByte(addr, ':')+1:]
		r.note(e.Name, e.Value, env[i].Value)
	}
	for i, e := range env {
		if prefix, ok := strings.CutSuffix(e.Name, "_HOST"); ok && hostOf[prefix].name != "" {
			continue // rewritten above
		}
		v, err := r.rewriteAddresses(e.Value)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", e.Name, err)
		}
		v = r.rewriteMounts(v)
		if v != e.Value {
			env[i].Value = v
			r.note(e.Name, e.Value, v)
		}
	}
	return env, nil
}

func hasPort(s serviceNames, port int32) bool {
	for _, p := range s.ports {
		if p == port {
			return true
		}
	}
	return false
}

// rewriteAddresses replaces `svc:port` and URLs naming a Service with its loopback address.
func (r *rewriter) rewriteAddresses(v string) (string, error) {
	var err error
	out := hostPortRE.ReplaceAllStringFunc(v, func(m string) string {
		sub := hostPortRE.FindStringSubmatch(m)
		lead, host, portStr, tail := sub[1], sub[2], sub[5], sub[6]
		s, ok := r.services[host]
		if !ok {
			return m
		}
		var port int32
		switch {
		case portStr != "":
			n, _ := strconv.Atoi(portStr)
			port = int32(n)
		case strings.HasPrefix(v, "https://"):
			port = 443
		case strings.HasPrefix(v, "http://"):
			port = 80
		default:
			return m // a bare name without a port: nothing to tell where to forward
		}
		if !hasPort(s, port) {
			return m
		}
		addr, aerr := r.address(s.namespace, s.name, port)
		if aerr != nil {
			err = aerr
			return m
		}
		return lead + addr + tail
	})
	return out, err
}

// rewriteMounts replaces a mount path (at a path boundary) with its directory here, in one
// pass: a directory written in place of one path is not read again for another (a claim's
// directory under /tmp is not then taken for the container's /tmp).
func (r *rewriter) rewriteMounts(v string) string {
	var b strings.Builder
	for i := 0; i < len(v); {
		before := i == 0 || strings.ContainsRune(`"'=:, `, rune(v[i-1]))
		matched := false
		for _, m := range r.mounts {
			path, dir := m[0], m[1]
			if path == "" || !before || !strings.HasPrefix(v[i:], path) {
				continue
			}
			end := i + len(path)
			if end == len(v) || strings.ContainsRune(`/"' ,:;`, rune(v[end])) {
				b.WriteString(dir)
				i, matched = end, true
				break
			}
		}
		if !matched {
			b.WriteByte(v[i])
			i++
		}
	}
	return b.String()
}

func (r *rewriter) note(name, from, to string) {
	r.log = append(r.log, fmt.Sprintf("%s: %q -> %q", name, from, to))
}
