package preflight

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/check"
)

// The authenticating edge (oauth2-proxy, issue 42): the Secrets it reads exist, and nothing
// exposes the release without it. Both read the rendered release, not the values: what the
// chart made of them is what will run.

const (
	edgeComponent  = "edge"
	edgeSecretsFix = "create the Secret (kubectl -n <namespace> create secret generic polyaxon-users --from-file=htpasswd=users, users written by `htpasswd -nbB user password`), or fix the name or key in the values (edge.htpasswd.*, edge.oidc.clientSecret.*)"
	edgeExposedFix = "put the edge in front: edge.enabled=true with edge.oidc.* or edge.htpasswd.secretName (docs/authentication.md); keep the gateway Service ClusterIP; or ignore this when something else in front authenticates users"
)

// asTyped copies a rendered object of kind into out (a pointer to its typed struct), whether
// the render typed it or left it unstructured; false when it is another kind.
func asTyped(o runtime.Object, kind string, out any) bool {
	if u, ok := o.(*unstructured.Unstructured); ok {
		return u.GetKind() == kind && runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, out) == nil
	}
	if reflect.TypeOf(o) != reflect.TypeOf(out) {
		return false
	}
	reflect.ValueOf(out).Elem().Set(reflect.ValueOf(o).Elem())
	return true
}

// edgeObjects finds the rendered edge Deployment and Service (nil when no edge is deployed),
// and the names of the Secrets the release renders itself.
func (e *Env) edgeObjects() (*appsv1.Deployment, *corev1.Service, map[string]bool) {
	var dep *appsv1.Deployment
	var svc *corev1.Service
	own := map[string]bool{}
	for _, o := range e.objects() {
		var d appsv1.Deployment
		var s corev1.Service
		var sec corev1.Secret
		switch {
		case asTyped(o, "Deployment", &d):
			if d.Labels["app.kubernetes.io/component"] == edgeComponent {
				dep = &d
			}
		case asTyped(o, "Service", &s):
			if s.Labels["app.kubernetes.io/component"] == edgeComponent {
				svc = &s
			}
		case asTyped(o, "Secret", &sec):
			own[sec.Name] = true
		}
	}
	return dep, svc, own
}

// edgeSecretRef is a Secret the edge reads: the value path that names it, and the key.
type edgeSecretRef struct {
	at, name, key string
	htpasswd      bool
}

func edgeSecretRefs(d *appsv1.Deployment, own map[string]bool) []edgeSecretRef {
	var out []edgeSecretRef
	spec := d.Spec.Template.Spec
	for _, v := range spec.Volumes {
		if v.Secret == nil || own[v.Secret.SecretName] {
			continue
		}
		for _, it := range v.Secret.Items {
			out = append(out, edgeSecretRef{at: "edge.htpasswd.secretName", name: v.Secret.SecretName, key: it.Key, htpasswd: v.Name == "htpasswd"})
		}
	}
	for _, c := range spec.Containers {
		for _, env := range c.Env {
			if env.ValueFrom == nil || env.ValueFrom.SecretKeyRef == nil || own[env.ValueFrom.SecretKeyRef.Name] {
				continue
			}
			out = append(out, edgeSecretRef{at: "edge.oidc.clientSecret.name", name: env.ValueFrom.SecretKeyRef.Name, key: env.ValueFrom.SecretKeyRef.Key})
		}
	}
	return out
}

// checkEdgeSecrets: the htpasswd and OIDC client Secrets the edge reads exist with their keys,
// and every htpasswd entry is hashed with a scheme oauth2-proxy reads (bcrypt or {SHA}).
func (e *Env) checkEdgeSecrets(ctx context.Context) (string, error) {
	d, _, own := e.edgeObjects()
	if d == nil {
		return "", check.Skip("no edge is deployed (edge.enabled, with an Ingress or an HTTPRoute)")
	}
	refs := edgeSecretRefs(d, own)
	if len(refs) == 0 {
		return "", check.Skip("the edge reads no Secret of yours")
	}
	cs, err := e.clientset()
	if err != nil {
		return "", err
	}
	var found []string
	for _, r := range refs {
		s, err := cs.CoreV1().Secrets(e.Namespace).Get(ctx, r.name, metav1.GetOptions{})
		if isNotFound(err) {
			return "", fmt.Errorf("%s: Secret %q not found in namespace %q: the edge's pod would never start, and users would get no login page", r.at, r.name, e.Namespace)
		}
		if err != nil {
			return "", fmt.Errorf("reading Secret %s/%s: %w", e.Namespace, r.name, err)
		}
		data, ok := s.Data[r.key]
		if !ok {
			if str, ok2 := s.StringData[r.key]; ok2 {
				data, ok = []byte(str), true
			}
		}
		if !ok {
			return "", fmt.Errorf("%s: Secret %q has no key %q (it has %s): the edge's pod would never start", r.at, r.name, r.key, secretKeys(s))
		}
		if r.htpasswd {
			users, bad := htpasswdUsers(string(data))
			if len(bad) > 0 {
				return "", fmt.Errorf("%s: Secret %q key %q: user(s) %s are hashed with a scheme oauth2-proxy does not read (it reads bcrypt and {SHA}; `htpasswd -n` writes MD5 unless given -B): they could never log in; write them with htpasswd -nbB", r.at, r.name, r.key, strings.Join(bad, ", "))
			}
			if users == 0 {
				return "", fmt.Errorf("%s: Secret %q key %q holds no user (lines user:hash): nobody could log in", r.at, r.name, r.key)
			}
			found = append(found, fmt.Sprintf("Secret %s (htpasswd, %d user(s))", r.name, users))
			continue
		}
		found = append(found, fmt.Sprintf("Secret %s (key %s)", r.name, r.key))
	}
	return "the edge reads " + strings.Join(found, ", "), nil
}

func secretKeys(s *corev1.Secret) string {
	var keys []string
	for k := range s.Data {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if len(keys) == 0 {
		return "none"
	}
	return strings.Join(keys, ", ")
}

// htpasswdUsers counts the entries of an htpasswd file and names those whose hash oauth2-proxy
// cannot check (its validator reads bcrypt, $2a$/$2b$/$2y$, and {SHA}).
func htpasswdUsers(file string) (int, []string) {
	n := 0
	var bad []string
	for _, line := range strings.Split(file, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		user, hash, _ := strings.Cut(line, ":")
		n++
		if !(strings.HasPrefix(hash, "$2a$") || strings.HasPrefix(hash, "$2b$") || strings.HasPrefix(hash, "$2y$") || strings.HasPrefix(hash, "{SHA}")) {
			bad = append(bad, user)
		}
	}
	return n, bad
}

// checkEdgeExposure warns when the release is reachable from outside the cluster (an Ingress,
// an HTTPRoute, a NodePort or LoadBalancer gateway Service) and the way in does not go through
// the edge: Polyaxon CE asks nobody to log in.
func (e *Env) checkEdgeExposure(_ context.Context) (string, error) {
	_, edgeSvc, _ := e.edgeObjects()
	edgeName := ""
	if edgeSvc != nil {
		edgeName = edgeSvc.Name
	}
	var through, open []string
	for _, o := range e.objects() {
		var ing networkingv1.Ingress
		var s corev1.Service
		switch {
		case asTyped(o, "Ingress", &ing):
			for _, b := range ingressBackends(ing) {
				if b != "" && b == edgeName {
					through = append(through, "Ingress "+ing.Name)
				} else {
					open = append(open, fmt.Sprintf("Ingress %s (to Service %s)", ing.Name, b))
				}
			}
		case asTyped(o, "Service", &s):
			if s.Labels["app.kubernetes.io/component"] == "gateway" && (s.Spec.Type == corev1.ServiceTypeNodePort || s.Spec.Type == corev1.ServiceTypeLoadBalancer) {
				open = append(open, fmt.Sprintf("the gateway Service %s of type %s (gateway.service.type)", s.Name, s.Spec.Type))
			}
		}
	}
	route, err := e.renderedRoute()
	if err != nil {
		return "", err
	}
	if route != nil {
		for _, rule := range route.Spec.Rules {
			for _, b := range rule.BackendRefs {
				if string(b.Name) == edgeName && edgeName != "" {
					through = append(through, "HTTPRoute "+route.Name)
				} else {
					open = append(open, fmt.Sprintf("HTTPRoute %s (to Service %s)", route.Name, b.Name))
				}
			}
		}
	}
	open = uniqStrings(open)
	if len(open) > 0 {
		return "", fmt.Errorf("reachable from outside with no authenticating edge: %s; Polyaxon CE asks nobody to log in, so whoever reaches it submits runs and reads every run's outputs", strings.Join(open, ", "))
	}
	if len(through) == 0 {
		return "", check.Skip("nothing exposes the release outside the cluster (no Ingress, no HTTPRoute)")
	}
	return "every way in goes through the edge (" + strings.Join(uniqStrings(through), ", ") + ")", nil
}

func ingressBackends(ing networkingv1.Ingress) []string {
	var out []string
	if b := ing.Spec.DefaultBackend; b != nil && b.Service != nil {
		out = append(out, b.Service.Name)
	}
	for _, r := range ing.Spec.Rules {
		if r.HTTP == nil {
			continue
		}
		for _, p := range r.HTTP.Paths {
			if p.Backend.Service != nil {
				out = append(out, p.Backend.Service.Name)
			}
		}
	}
	return out
}

func uniqStrings(in []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range in {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}
