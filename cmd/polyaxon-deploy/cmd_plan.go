package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/urfave/cli/v2"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/output"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/plan"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/render"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/runs"
)

const (
	flagTopology      = "topology"
	flagCanary        = "canary"
	flagCanaryTimeout = "canary-timeout"
	flagPoolLabel     = "pool-label"
	flagNoRelease     = "no-release"
)

func planCommand() *cli.Command {
	return &cli.Command{
		Name:      "plan",
		Usage:     "show where every pod of the release and of distributed runs would be scheduled, before anything runs",
		UsageText: "polyaxon-deploy plan [--profile P] [-f FILE]... [--set k=v]... [--topology FILE]... [--canary] [--strict] [-o table|json|yaml]",
		Description: `Reads the cluster's nodes and the pods bound to them (two paginated LISTs), renders the
release, and places every pod it would create (core, runner, dependencies, with replicas),
one probe per run category (experiments, jobs, builds, tensorboards, notebooks) and each
--topology run, with the kube-scheduler's filters: node selector and required node
affinity, taints and tolerations, cpu/memory/ephemeral-storage/nvidia.com/gpu and other
extended resources, pod count, host ports, cordoned and NotReady nodes. For each pod it
prints the node (when certain) or the feasible node pools, or the scheduler's reason per
constraint ("0/12 nodes are available: ..."). Verdicts are "fits", "unschedulable" or
"uncertain" (depends on scheduler scoring or a constraint not evaluated; see -o json notes).

--topology FILE is a distributed run (Polyaxon environment shape: resources, replicas with
n_workers/n_ps, default_worker/default_ps, per-index overrides; memory in MiB, gpu =
nvidia.com/gpu) with optional GPU-fraction placement ({mode: per-gpu} or
{mode: per-machine, processesPerMachine: N}). --canary (after install) creates one tiny pod
per run category in the namespace, waits for the real scheduler and deletes them.

The release's own running pods are left out of the cluster's usage (the rendered pods
replace them); --no-release plans only the topologies and probes against the cluster as is.
Exit codes: 0 everything fits, 1 error, 2 usage, 3 something does not fit, 4 only
uncertain-but-fitting pods with --strict.`,
		Flags: joinFlags(clusterFlags(), inputFlags(), outputFlags(), []cli.Flag{
			&cli.StringSliceFlag{Name: flagTopology, Usage: "distributed run `FILE` to place after the release; repeatable", Category: "Plan"},
			&cli.BoolFlag{Name: flagCanary, Usage: "also create one tiny pod per run category and report what the real scheduler did (then delete them)", Category: "Plan"},
			&cli.DurationFlag{Name: flagCanaryTimeout, Value: 60 * time.Second, Usage: "how long to wait for the scheduler with --canary", Category: "Plan"},
			&cli.StringSliceFlag{Name: flagPoolLabel, Usage: "node label `KEY` naming a node pool; repeatable (default: polyaxon, polyaxon.com, cloud node-pool labels)", Category: "Plan"},
			&cli.BoolFlag{Name: flagNoRelease, Usage: "do not place the release's pods (it is installed): plan topologies and category probes only", Category: "Plan"},
			&cli.BoolFlag{Name: flagStrict, Usage: "exit 4 when the only problems are uncertain pods that fit as planned", Category: "Checks"},
		}),
		Action: runPlan,
	}
}

func runPlan(c *cli.Context) error {
	if c.NArg() > 0 {
		return usageErrorf("plan takes no arguments, got %q (topologies go in --topology FILE)", c.Args().Slice())
	}
	p, err := printer(c)
	if err != nil {
		return err
	}
	// Topologies first: a typo should fail before any cluster call.
	var topologies []*plan.Topology
	for _, f := range c.StringSlice(flagTopology) {
		t, err := plan.LoadTopology(f)
		if err != nil {
			return err
		}
		topologies = append(topologies, t)
	}
	in, err := loadInputs(c)
	if err != nil {
		return err
	}
	warnInputs(c, in)
	rendered, err := render.Render(in.Chart, in.Values, clusterReleaseOptions(c))
	if err != nil {
		return err
	}
	envOf(c).scrub.Add(render.SecretValues(rendered.All())...)
	objs := renderedObjects(rendered)
	release, ns := c.String(flagRelease), c.String(flagNamespace)

	var pods []plan.PodToPlace
	if !c.Bool(flagNoRelease) {
		if pods, err = plan.PodsFromObjects(objs); err != nil {
			return err
		}
	}
	decl, err := runs.Load(in.Chart)
	if err != nil {
		return err
	}
	placement, err := plan.CategoryDefaults(objs, decl, ns)
	switch {
	case errors.Is(err, plan.ErrNoPlacementPolicies):
		progress(c).Warn("the release places no run by category (" + err.Error() + "): runs go where their own environment says")
	case err != nil:
		return err
	}
	pods = append(pods, plan.CategoryProbes(placement, ns)...)
	for i, t := range topologies {
		cat := t.Category
		if cat == "" {
			cat = "experiments"
		}
		defaults, _ := placement.Get(cat)
		tp, err := t.Pods(plan.TopologyName(c.StringSlice(flagTopology)[i]), ns, defaults)
		if err != nil {
			return fmt.Errorf("topology %s: %w", c.StringSlice(flagTopology)[i], err)
		}
		pods = append(pods, tp...)
	}

	ctx, stop := commandContext(c)
	defer stop()
	cs, err := kubeSettings(c).Clientset()
	if err != nil {
		return err
	}
	progress(c).Step("reading nodes and pods")
	start := time.Now()
	var snapOpts []plan.SnapshotOption
	if !c.Bool(flagNoRelease) {
		snapOpts = append(snapOpts, plan.WithExcludedRelease(release))
	}
	snap, err := plan.LoadSnapshot(ctx, cs, snapOpts...)
	if err != nil {
		return err
	}
	debugf(c, "plan: snapshot of %d nodes, %d pods in %d LIST calls, %s", len(snap.Nodes), snap.ExistingPods, snap.APICalls, time.Since(start))

	var opts []plan.Option
	if labels := listFlag(c, flagPoolLabel); len(labels) > 0 {
		opts = append(opts, plan.WithPoolLabels(labels...))
	}
	start = time.Now()
	res := plan.Plan(snap, pods, opts...)
	debugf(c, "plan: %d pods placed in %s: %+v", len(pods), time.Since(start), res.Summary)

	if c.Bool(flagCanary) {
		if len(placement.Categories) == 0 {
			return withExit(ExitError, fmt.Errorf("--canary: the chart declares no run category"))
		}
		progress(c).Step(fmt.Sprintf("canary: one pod per run category in namespace %s", ns))
		can, err := plan.RunCanary(ctx, cs, ns, placement, plan.WithCanaryTimeout(c.Duration(flagCanaryTimeout)))
		res.AddCanary(can)
		if err != nil {
			return err
		}
	}

	if p.Structured() {
		status := output.StatusOK
		switch res.ExitCode(true) {
		case plan.ExitCheckFailed:
			status = output.StatusFailed
		case plan.ExitWarnings:
			status = output.StatusWarning
		}
		out := resultWithWarnings("plan", in)
		if status != output.StatusOK {
			out.Status = status
		}
		out.Release.Name, out.Release.Namespace = release, ns
		if err := p.Print(out.WithData(res)); err != nil {
			return err
		}
	} else if err := plan.WriteTable(stdout(c), res); err != nil {
		return err
	}
	switch res.ExitCode(c.Bool(flagStrict)) {
	case plan.ExitCheckFailed:
		return withExit(ExitCheckFailed, fmt.Errorf("plan: does not fit: %s", res.Summary))
	case plan.ExitWarnings:
		return withExit(ExitWarnings, fmt.Errorf("plan: %d uncertain pod(s) with --strict", res.Summary.Warnings))
	}
	return nil
}

// renderedObjects are the manifests and hooks, typed where the scheme knows the kind.
func renderedObjects(r *render.Result) []runtime.Object {
	var out []runtime.Object
	for _, list := range [][]render.Manifest{r.Manifests, r.Hooks} {
		for _, m := range list {
			if m.Typed != nil {
				out = append(out, m.Typed)
			} else {
				out = append(out, m.Object)
			}
		}
	}
	return out
}
