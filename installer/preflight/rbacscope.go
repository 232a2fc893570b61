package preflight

import (
	"context"
	"fmt"
	"sort"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/check"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/plan"
)

// checkRBACScope warns when the runner's Roles are cluster-wide (rbac.clusterScoped=true):
// the agent and operator then hold their rights in every namespace, not only the runs'.
func (e *Env) checkRBACScope(context.Context) (string, error) {
	if e.Rendered == nil {
		return "", check.Skip("nothing rendered")
	}
	v, err := e.chartValues()
	if err != nil {
		return "", err
	}
	if !v.RBAC.Create {
		return "", check.Skip("rbac.create=false: the chart creates no Roles")
	}
	if !v.RBAC.ClusterScoped {
		return fmt.Sprintf("the agent's and operator's rights are limited to namespace %s", plan.RunsNamespace(e.objects(), e.Namespace)), nil
	}
	var roles []string
	for _, m := range e.manifests() {
		if m.Kind() == "ClusterRole" {
			roles = append(roles, m.Name())
		}
	}
	sort.Strings(roles)
	msg := "rbac.clusterScoped=true: the agent and operator hold their rights in every namespace of the cluster, not only in " + e.Namespace
	if len(roles) > 0 {
		msg += fmt.Sprintf(" (ClusterRoles %v)", roles)
	}
	return "", check.Warnf("%s", msg)
}
