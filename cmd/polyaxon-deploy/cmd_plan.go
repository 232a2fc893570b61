package main

import (
	"fmt"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/action"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/output"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/plan"
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
	if err := noArgs(c, " (topologies go in --topology FILE)"); err != nil {
		return err
	}
	p, err := printer(c)
	if err != nil {
		return err
	}
	ctx, stop := commandContext(c)
	defer stop()
	done, err := (&action.Plan{Env: actionEnv(c), Clients: kubeSettings(c), Given: givenOf(c, true), Render: releaseOptions(c), Cluster: clusterCapabilities(c),
		Topologies: c.StringSlice(flagTopology), NoRelease: c.Bool(flagNoRelease), PoolLabels: listFlag(c, flagPoolLabel),
		Canary: c.Bool(flagCanary), CanaryTimeout: c.Duration(flagCanaryTimeout)}).Run(ctx)
	if err != nil {
		return usageExit(err)
	}
	res := done.Result
	if err := printPlan(c, p, done.Inputs, res); err != nil {
		return err
	}
	switch res.Conclusion() {
	case plan.DoesNotFit:
		return withExit(ExitCheckFailed, fmt.Errorf("plan: does not fit: %s", res.Summary))
	case plan.FitUncertain:
		if c.Bool(flagStrict) {
			return withExit(ExitWarnings, fmt.Errorf("plan: %d uncertain pod(s) with --strict", res.Summary.Warnings))
		}
	}
	return nil
}

// printPlan prints the plan's tables, or the result with the plan as data.
func printPlan(c *cli.Context, p *output.Printer, in *action.Inputs, res *plan.Result) error {
	if !p.Structured() {
		return plan.WriteTable(stdout(c), res)
	}
	out := resultWithWarnings("plan", in)
	switch res.Conclusion() {
	case plan.DoesNotFit:
		out.Status = output.StatusFailed
	case plan.FitUncertain:
		out.Status = output.StatusWarning
	}
	out.Release.Name, out.Release.Namespace = c.String(flagRelease), c.String(flagNamespace)
	return p.Print(out.WithData(res))
}
