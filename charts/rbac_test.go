package charts_test

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

// upstreamRule is one rule of testdata/rbac-upstream.yaml; When names the values switch a
// conditional rule depends on.
type upstreamRule struct {
	When      string   `json:"when"`
	APIGroups []string `json:"apiGroups"`
	Resources []string `json:"resources"`
	Verbs     []string `json:"verbs"`
}

// grants flattens rules into "group resource verb" lines, so two ways of writing the same
// rights compare equal.
func grants(rules []rbacv1.PolicyRule) []string {
	seen := map[string]bool{}
	for _, r := range rules {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					seen[fmt.Sprintf("%s %s %s", g, res, v)] = true
				}
			}
		}
	}
	out := slices.Sorted(maps.Keys(seen))
	return out
}

func upstreamGrants(t *testing.T, component string, on map[string]bool) []string {
	t.Helper()
	raw, err := os.ReadFile("testdata/rbac-upstream.yaml")
	require.NoError(t, err)
	var doc map[string]struct {
		Source string         `json:"source"`
		Rules  []upstreamRule `json:"rules"`
	}
	require.NoError(t, yaml.UnmarshalStrict(raw, &doc))
	var rules []rbacv1.PolicyRule
	for _, r := range doc[component].Rules {
		if r.When != "" && !on[r.When] {
			continue
		}
		rules = append(rules, rbacv1.PolicyRule{APIGroups: r.APIGroups, Resources: r.Resources, Verbs: r.Verbs})
	}
	return grants(rules)
}

// renderedGrants: every rule bound to the component's service account, Role and ClusterRole.
func renderedGrants(t *testing.T, r rendered, component string) (namespaced, clusterWide []string) {
	t.Helper()
	var ns, cl []rbacv1.PolicyRule
	for _, o := range r.objects {
		if o.GetLabels()["app.kubernetes.io/component"] != component {
			continue
		}
		switch o.GetKind() {
		case "Role":
			var role rbacv1.Role
			decodeStrict(t, o, &role)
			ns = append(ns, role.Rules...)
		case "ClusterRole":
			var role rbacv1.ClusterRole
			decodeStrict(t, o, &role)
			cl = append(cl, role.Rules...)
		}
	}
	return grants(ns), grants(cl)
}

// The runner's rights are those of Polyaxon's own chart (testdata/rbac-upstream.yaml, each
// rule with the upstream file it comes from), no more and no fewer, for every operator switch.
func TestRBACMatchesUpstream(t *testing.T) {
	operators := []string{"tfjob", "pytorchjob", "mpijob", "raycluster", "daskcluster"}
	for _, allOn := range []bool{false, true} {
		t.Run(fmt.Sprintf("operators=%v", allOn), func(t *testing.T) {
			ops, on := map[string]any{}, map[string]bool{}
			for _, o := range operators {
				ops[o] = allOn
				on["operators."+o] = allOn
			}
			r := render(t, map[string]any{"operators": ops})
			for _, c := range []string{"agent", "operator", "runs", "gateway"} {
				ns, cl := renderedGrants(t, r, c)
				assert.Equal(t, upstreamGrants(t, c, on), ns, "Role of %s differs from testdata/rbac-upstream.yaml", c)
				assert.Empty(t, cl, "%s has cluster-wide rights without rbac.clusterScoped", c)
			}
		})
	}
}

// Cluster scope widens the runner's reach to every namespace, but never for Secrets or exec:
// those stay in a Role of the release namespace.
func TestRBACClusterScopeKeepsSecretsAndExecNamespaced(t *testing.T) {
	r := render(t, map[string]any{"rbac": map[string]any{"clusterScoped": true}})
	for _, c := range []string{"agent", "operator"} {
		ns, cl := renderedGrants(t, r, c)
		all := append(append([]string(nil), ns...), cl...)
		sort.Strings(all)
		assert.Equal(t, upstreamGrants(t, c, nil), dedupe(all), "%s: cluster scope changes where rights apply, not which", c)
		for _, g := range cl {
			assert.False(t, strings.Contains(g, " secrets ") || strings.Contains(g, " pods/exec "), "%s has cluster-wide %q", c, g)
		}
	}
	ns, _ := renderedGrants(t, r, "agent")
	assert.Contains(t, ns, " secrets get", "the agent keeps its Secret rights in its own namespace")
	assert.Contains(t, ns, " pods/exec create")
}

func dedupe(s []string) []string {
	var out []string
	for i, x := range s {
		if i == 0 || s[i-1] != x {
			out = append(out, x)
		}
	}
	return out
}
