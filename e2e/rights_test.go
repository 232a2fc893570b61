package e2e

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// rightsOf is what `kubectl auth can-i --list --as system:serviceaccount:<saNS>:<sa> -n <ns>`
// prints, one "verbs resource" line per rule, as the API server's authorizer answers a
// SelfSubjectRulesReview of that account. The rules every account has (those of an account
// nothing is bound to: its own access reviews, cluster trust bundles) are left out.
func rightsOf(t *testing.T, c *testCluster, saNS, sa, ns string) []string {
	t.Helper()
	everyone := rulesOf(t, c, saNS, "no-such-account-e2e", ns)
	var out []string
	for _, r := range rulesOf(t, c, saNS, sa, ns) {
		if !slices.Contains(everyone, r) {
			out = append(out, r)
		}
	}
	return out
}

func rulesOf(t *testing.T, c *testCluster, saNS, sa, ns string) []string {
	t.Helper()
	cfg := rest.CopyConfig(c.RESTConfig)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + saNS + ":" + sa}
	cs, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	review, err := cs.AuthorizationV1().SelfSubjectRulesReviews().Create(ctxT(t, time.Minute),
		&authorizationv1.SelfSubjectRulesReview{Spec: authorizationv1.SelfSubjectRulesReviewSpec{Namespace: ns}}, metav1.CreateOptions{})
	require.NoError(t, err)
	var out []string
	for _, r := range review.Status.ResourceRules {
		var resources []string
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				if g != "" {
					res += "." + g
				}
				resources = append(resources, res)
			}
		}
		out = append(out, fmt.Sprintf("%s %s", strings.Join(r.Verbs, ","), strings.Join(resources, ",")))
	}
	slices.Sort(out)
	return out
}
