package action

// Sized from pools (installer/plan runpools.go): when install, upgrade or plan reach the cluster, the
// runs' quota totals and one run container's max default to what the run pools' nodes hold.
// The sizing is a values layer between the profile and the user's values (a value the user
// sets wins, key by key), made again by every install and upgrade from the nodes as they are,
// and never stored with the release's inputs.

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/chartvalues"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/plan"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/render"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/runs"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/values"
)

// clientset makes the cluster's client (preflight.Clients and Clients both do).
type clientset interface {
	Clientset() (kubernetes.Interface, error)
}

// poolSizing is one sizing step: the cluster, how the release renders on it, and the nodes
// when plan has read them already.
type poolSizing struct {
	clients clientset
	render  render.Options
	// snap is the cluster as plan read it (nil: the nodes are listed here).
	snap       *plan.Snapshot
	poolLabels []string
}

// sizeFromPools layers the sizing of the run pools into in.Values and returns it; nil when
// nothing is sized: the release bounds no runs' namespace of their own, no node is in a run
// pool, or the nodes could not be read (a warning says so, and the checks report the
// cluster). The values then say what the quota holds, as `helm template` renders them.
func (e *Env) sizeFromPools(ctx context.Context, in *Inputs, s poolSizing) (*plan.RunPools, error) {
	if s.clients == nil {
		return nil, nil
	}
	rendered, err := e.render(in, s.render)
	if err != nil {
		return nil, err
	}
	objs := rendered.Objects()
	if plan.RunsQuotaOf(objs, s.render.Namespace) == nil {
		return nil, nil
	}
	categories, err := runCategories(in, rendered, objs, s.render.Namespace)
	if err != nil {
		e.progress().Warn("the runs' quota is not sized from the run pools (" + err.Error() + "): it keeps the values' totals")
		return nil, nil
	}
	snap := s.snap
	if snap == nil {
		if snap, err = nodesOf(ctx, s.clients); err != nil {
			e.progress().Warn("the runs' quota is not sized from the run pools: reading the nodes: " + err.Error() + "; it keeps the values' totals")
			return nil, nil
		}
	}
	sizing := plan.SizeRunPools(snap, categories, s.poolLabels)
	if sizing == nil {
		e.progress().Warn("no node is in a run pool (the run categories' nodeSelectors select none): the runs' quota keeps the values' totals")
		return nil, nil
	}
	if err := in.layerUnderUser(sizing.Values()); err != nil {
		return nil, err
	}
	e.progress().OK("runs' quota sized from the " + sizing.String())
	e.debugf("sized from pools: %v", sizing.Paths())
	return sizing, nil
}

// runCategories is where a run of each category goes, as the release's admission policies
// place it; without placement policies (a cluster before 1.36, runs.admissionPolicies off),
// the categories' own nodeSelectors and tolerations, which a run must then name itself.
func runCategories(in *Inputs, rendered *render.Result, objs []runtime.Object, namespace string) ([]plan.CategoryScheduling, error) {
	decl, err := runs.Load(in.Chart)
	if err != nil {
		return nil, err
	}
	placement, err := plan.CategoryDefaults(objs, decl, namespace)
	if errors.Is(err, plan.ErrNoPlacementPolicies) {
		vals, err := chartvalues.Of(rendered.Values)
		if err != nil {
			return nil, err
		}
		var out []plan.CategoryScheduling
		for _, name := range decl.Names() {
			out = append(out, plan.CategoryScheduling{Category: name, NodeSelector: vals.NodeSelectors[name], Tolerations: vals.Tolerations[name]})
		}
		return out, nil
	}
	return placement.Categories, err
}

// nodesOf reads the cluster's nodes, a page at a time, as plan's snapshot holds them (no pod:
// the sizing reads what the nodes hold, not what is free).
func nodesOf(ctx context.Context, clients clientset) (*plan.Snapshot, error) {
	cs, err := clients.Clientset()
	if err != nil {
		return nil, err
	}
	var nodes []corev1.Node
	opts := metav1.ListOptions{Limit: plan.DefaultPageSize}
	for {
		list, err := cs.CoreV1().Nodes().List(ctx, opts)
		if err != nil {
			return nil, err
		}
		nodes = append(nodes, list.Items...)
		if opts.Continue = list.Continue; opts.Continue == "" {
			return plan.NewSnapshot(nodes, nil), nil
		}
	}
}

// layerUnderUser rebuilds the values with layer between the profile and the user's files
// and --set values: profile < layer < -f < --set.
func (in *Inputs) layerUnderUser(layer map[string]any) error {
	p := *in.Profile
	p.Values = values.Merge(values.DeepCopy(in.Profile.Values), layer)
	merged, _, err := values.Build(layersOf(&p, in.Given))
	if err != nil {
		return fmt.Errorf("the runs' quota sized from the run pools: %w", err)
	}
	in.Values = merged
	return nil
}

// plannedRunsQuota is the runs' quota the release would render with in's values (sized
// already), with what the run pools sized of it; nil when it renders none.
func (e *Env) plannedRunsQuota(in *Inputs, opts render.Options, sizing *plan.RunPools) (*plan.RunsQuota, error) {
	rendered, err := e.render(in, opts)
	if err != nil {
		return nil, err
	}
	q := plan.RunsQuotaOf(rendered.Objects(), opts.Namespace)
	if q != nil && sizing != nil {
		q.SizedFrom, q.Sized = sizing.Pools, sizing.Paths()
	}
	return q, nil
}
