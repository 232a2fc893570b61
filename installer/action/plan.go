package action

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/plan"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/render"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/runs"
)

// Plan places every pod the release would create, a probe per run category and each
// topology on the cluster's nodes, with the scheduler's predicates (installer/plan); with
// Canary it then asks the real scheduler, one tiny pod per run category.
type Plan struct {
	Env
	Clients    Clients
	Inputs     *Inputs
	Render     render.Options
	Topologies []Topology
	// NoRelease leaves the release's pods out (it is installed): topologies and probes only.
	NoRelease bool
	// PoolLabels name node pools (nil: plan.DefaultPoolLabels).
	PoolLabels    []string
	Canary        bool
	CanaryTimeout time.Duration
}

// Topology is a distributed run to place, with the file it came from (its name).
type Topology struct {
	File string
	*plan.Topology
}

// Run plans.
func (a *Plan) Run(ctx context.Context) (*plan.Result, error) {
	rendered, err := render.Render(a.Inputs.Chart, a.Inputs.Values, a.Render)
	if err != nil {
		return nil, err
	}
	a.Secrets.Add(render.SecretValues(rendered.All())...)
	objs := rendered.Objects()
	ns := a.Render.Namespace

	var pods []plan.PodToPlace
	if !a.NoRelease {
		if pods, err = plan.PodsFromObjects(objs); err != nil {
			return nil, err
		}
	}
	decl, err := runs.Load(a.Inputs.Chart)
	if err != nil {
		return nil, err
	}
	placement, err := plan.CategoryDefaults(objs, decl, ns)
	switch {
	case errors.Is(err, plan.ErrNoPlacementPolicies):
		a.progress().Warn("the release places no run by category (" + err.Error() + "): runs go where their own environment says")
	case err != nil:
		return nil, err
	}
	pods = append(pods, plan.CategoryProbes(placement, ns)...)
	for _, t := range a.Topologies {
		defaults, _ := placement.Get(t.RunCategory())
		tp, err := t.Pods(plan.TopologyName(t.File), ns, defaults)
		if err != nil {
			return nil, fmt.Errorf("topology %s: %w", t.File, err)
		}
		pods = append(pods, tp...)
	}

	cs, err := a.Clients.Clientset()
	if err != nil {
		return nil, err
	}
	a.progress().Step("reading nodes and pods")
	start := time.Now()
	var snapOpts []plan.SnapshotOption
	if !a.NoRelease {
		names, err := render.NamesOf(a.Inputs.Chart, a.Inputs.Values, a.Render.ReleaseName)
		if err != nil {
			return nil, err
		}
		snapOpts = append(snapOpts, plan.WithExcludedRelease(names.Selector))
	}
	snap, err := plan.LoadSnapshot(ctx, cs, snapOpts...)
	if err != nil {
		return nil, err
	}
	a.debugf("plan: snapshot of %d nodes, %d pods in %d LIST calls, %s", len(snap.Nodes), snap.ExistingPods, snap.APICalls, time.Since(start))

	var opts []plan.Option
	if len(a.PoolLabels) > 0 {
		opts = append(opts, plan.WithPoolLabels(a.PoolLabels...))
	}
	start = time.Now()
	res := plan.Plan(snap, pods, opts...)
	a.debugf("plan: %d pods placed in %s: %+v", len(pods), time.Since(start), res.Summary)

	if a.Canary {
		if len(placement.Categories) == 0 {
			return nil, errors.New("--canary: the chart declares no run category")
		}
		a.progress().Step(fmt.Sprintf("canary: one pod per run category in namespace %s", ns))
		can, err := plan.RunCanary(ctx, cs, ns, placement, plan.WithCanaryTimeout(a.CanaryTimeout))
		res.AddCanary(can)
		if err != nil {
			return nil, err
		}
	}
	return res, nil
}
