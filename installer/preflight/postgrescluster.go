package preflight

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/chartvalues"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/check"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/cnpg"
)

const (
	postgresFailoverFix = "set postgresql.cloudnativepg.instances to 2 or more (3 keeps a replica while another is rebuilt) and postgresql.cloudnativepg.podAntiAffinityType=required, with as many nodes matching postgresql.nodeSelector"
	postgresClusterFix  = "kubectl -n NAMESPACE describe cluster.postgresql.cnpg.io NAME and the operator's log say why; `polyaxon-deploy status` shows each instance, its role and its lag"
)

// checkPostgresFailover warns when a CloudNativePG database would not survive one node: fewer
// instances than the profile asks for, or instances allowed to share a node.
func (e *Env) checkPostgresFailover(context.Context) (string, error) {
	v, err := e.chartValues()
	if err != nil {
		return "", err
	}
	if v.Postgresql.Where() != chartvalues.PostgresCloudNativePG {
		return "", check.Skip("postgresql.mode is not cloudnativepg")
	}
	c := v.Postgresql.CloudNativePG
	var problems []string
	if min := e.Policy.MinPostgresInstances; c.Instances < min {
		problems = append(problems, fmt.Sprintf("postgresql.cloudnativepg.instances is %d, below the profile's %d: losing the node of a lone instance stops the platform until it is back", c.Instances, min))
	}
	if c.Instances > 1 && c.PodAntiAffinityType != "required" {
		problems = append(problems, fmt.Sprintf("postgresql.cloudnativepg.podAntiAffinityType is %q: two instances may share a node, and that node's loss takes both", c.PodAntiAffinityType))
	}
	if len(problems) > 0 {
		return "", fmt.Errorf("%s", strings.Join(problems, "; "))
	}
	return fmt.Sprintf("%d instances, no two on one %s", c.Instances, c.TopologyKey), nil
}

// checkPostgresCluster: the installed release's CloudNativePG Cluster is healthy, every
// instance ready, with one primary.
func (e *Env) checkPostgresCluster(ctx context.Context) (string, error) {
	v, err := e.chartValues()
	if err != nil {
		return "", err
	}
	if v.Postgresql.Where() != chartvalues.PostgresCloudNativePG {
		return "", check.Skip("postgresql.mode is not cloudnativepg")
	}
	cs, err := e.clientset()
	if err != nil {
		return "", err
	}
	names, err := e.names()
	if err != nil {
		return "", err
	}
	name := names.Component("postgresql")
	// After an install or upgrade the operator rolls a changed Cluster out instance by instance,
	// with a switchover: wait for it, up to the profile's timeout. A plain `check` reports it as
	// it is.
	wait := e.SettleTime
	if wait > 0 {
		wait = max(wait, e.Policy.TimeoutOrDefault())
	}
	return settle(ctx, wait, 2*time.Second, func(ctx context.Context) (string, error) {
		s, err := cnpg.Read(ctx, cs, e.Namespace, name, nil)
		if err != nil {
			return "", err
		}
		if p := s.Problem(); p != "" {
			return "", fmt.Errorf("CloudNativePG Cluster %s is not healthy: %s", name, p)
		}
		return fmt.Sprintf("Cluster %s: %d of %d instances ready, primary %s", name, s.Ready, s.Instances, s.Primary), nil
	})
}
