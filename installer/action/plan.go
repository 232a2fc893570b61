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
	Clients Clients
	Given   Given
	Render  render.Options
	// Cluster reads the cluster's capabilities for the render (see Install.Cluster).
	Cluster func() *render.Cluster
	// Topologies are the files of distributed runs to place (--topology), read first: a typo
	// fails before anything else is read.
	Topologies []string
	// NoRelease leaves the release's pods out (it is installed): topologies and probes only.
	NoRelease bool
	// PoolLabels name node pools (nil: plan.DefaultPoolLabels).
	PoolLabels    []string
	Canary        bool
	CanaryTimeout time.Duration
}

// topology is a distributed run to place, with the file it came from (its name).
type topology struct {
	file string
	*plan.Topology
}

// PlanResult is the plan, with the inputs the release was rendered from.
type PlanResult struct {
	Inputs *Inputs
	*plan.Result
}

// Run plans. The result is nil after an error.
func (a *Plan) Run(ctx context.Context) (*PlanResult, error) {
	var topologies []topology
	for _, f := range a.Topologies {
		t, err := plan.LoadTopology(f)
		if err != nil {
			return nil, err
		}
		topologies = append(topologies, topology{file: f, Topology: t})
	}
	in, err := a.load(ctx, a.Given)
	if err != nil {
		return nil, err
	}
	ropts := withCluster(a.Render, a.Cluster)
	rendered, err := render.Render(in.Chart, in.Values, ropts)
	if err != nil {
		return nil, err
	}
	a.Secrets.Add(render.SecretValues(rendered.All())...)
	objs := rendered.Objects()
	ns := ropts.Namespace

	var pods []plan.PodToPlace
	if !a.NoRelease {
		if pods, err = plan.PodsFromObjects(objs); err != nil {
			return nil, err
		}
	}
	decl, err := runs.Load(in.Chart)
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
	for _, t := range topologies {
		defaults, _ := placement.Get(t.RunCategory())
		tp, err := t.Pods(plan.TopologyName(t.file), ns, defaults)
		if err != nil {
			return nil, fmt.Errorf("topology %s: %w", t.file, err)
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
		names, err := render.NamesOf(in.Chart, in.Values, ropts.ReleaseName)
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
	sizing, err := a.sizeFromPools(ctx, in, poolSizing{clients: a.Clients, render: ropts, snap: snap, poolLabels: a.PoolLabels})
	if err != nil {
		return nil, err
	}

	var opts []plan.Option
	if len(a.PoolLabels) > 0 {
		opts = append(opts, plan.WithPoolLabels(a.PoolLabels...))
	}
	start = time.Now()
	res := plan.Plan(snap, pods, opts...)
	a.debugf("plan: %d pods placed in %s: %+v", len(pods), time.Since(start), res.Summary)
	if res.RunsQuota, err = a.plannedRunsQuota(in, ropts, sizing); err != nil {
		return nil, err
	}

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
	return &PlanResult{Inputs: in, Result: res}, nil
}
