// Package plan answers "will it schedule, and where?" before anything runs: the engine behind
// `polyaxon-deploy plan` and the scheduling checks of `check`.
//
// Inputs:
//   - the cluster: LoadSnapshot reads nodes and the pods bound to them with two paginated
//     LIST chains (client-go pager, 500 per page; pods with the kube-scheduler's own field
//     selector status.phase!=Succeeded,status.phase!=Failed), so API calls are 2 plus extra
//     pages, whatever the cluster size. The snapshot keeps per-node sums, not pods.
//   - the release: PodsFromObjects turns rendered objects (typed k8s.io/api or unstructured
//     Deployments, StatefulSets, ReplicaSets, Jobs, CronJobs, DaemonSets, Pods) into pods with
//     replica counts and names; CategoryDefaults reads the run categories' scheduling from the
//     agent ConfigMap and CategoryProbes makes one probe pod per category.
//   - distributed runs: LoadTopology/ParseTopology read a Polyaxon-style environment (see
//     Topology for the format, Placement for GPU-fraction modes); Topology.Pods expands it.
//
// Plan places everything and returns a Result (JSON schema in schema.json, also as Schema);
// WriteTable prints it for people. CategoryFeasibility is the per-category entry point for
// `check`; Feasible lists the nodes a single pod fits now; RunCanary asks the real scheduler.
// SizeRunPools sums what the run pools' nodes hold ("sized from pools", runpools.go: the runs'
// quota totals and one run container's max, which installer/action layers under the user's
// values); RunsQuotaOf reads the quota a rendered release bounds runs with, which the Result
// carries (RunsQuota).
//
// How the filters, the placement and the verdicts work, and what is not evaluated, is
// described at the top of engine.go. In short: kube-scheduler filter semantics through
// k8s.io/component-helpers; a node is named only when it is certain; otherwise the feasible
// pools are reported and capacity is consumed on an assumed node; verdicts are "fits" and
// "unschedulable" only when they hold for every choice the scheduler could make for earlier
// pods, else "uncertain".
//
// Result.Conclusion: AllFit, FitUncertain (every pod fits as planned, some uncertain), or
// DoesNotFit (unschedulable, or uncertain and not fitting as planned, or a canary not
// scheduled). The command maps it to exit codes 0, 4 with --strict, and 3.
//
// The package plantest holds a paginating fake API for benchmarks and the seedable case
// generator and comparison used by the agreement test against the real kube-scheduler
// (e2e/plan_agreement_test.go).
package plan
