package plan

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
)

// WriteJSON writes the result as indented JSON (the schema in schema.json).
func WriteJSON(w io.Writer, r *Result) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteTable writes the result for people: the cluster's pools, one line per pod, the
// category probes, each topology's replica groups and what is missing, then a summary.
func WriteTable(w io.Writer, r *Result) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "CLUSTER: %d nodes (%d ready, %d unschedulable), %d existing pods, %d API calls\n",
		r.Cluster.Nodes, r.Cluster.ReadyNodes, r.Cluster.UnschedulableNodes, r.Cluster.ExistingPods, r.Cluster.APICalls)
	fmt.Fprintln(tw, "POOL\tNODES\tFREE CPU\tFREE MEMORY\tFREE GPU\tFREE PODS")
	for _, p := range r.Cluster.Pools {
		fmt.Fprintf(tw, "%s\t%d\t%s/%s\t%s/%s\t%s\t%s\n", p.Pool, p.Nodes,
			orDash(p.Free["cpu"]), orDash(p.Allocatable["cpu"]), orDash(p.Free["memory"]), orDash(p.Allocatable["memory"]),
			gpuText(p), orDash(p.Free["pods"]))
	}
	fmt.Fprintln(tw)
	if len(r.Pods) > 0 {
		fmt.Fprintln(tw, "POD\tKIND\tREQUESTS\tVERDICT\tNODE / POOL\tFEASIBLE\tWHY NOT")
		for _, p := range r.Pods {
			writePodLine(tw, p, p.Name)
		}
		fmt.Fprintln(tw)
	}
	if len(r.Categories) > 0 {
		fmt.Fprintln(tw, "RUN CATEGORY\tSCHEDULING\tVERDICT\tNODE / POOL\tFEASIBLE\tWHY NOT")
		for _, c := range r.Categories {
			p := c.Result
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\n", c.Category, c.Scheduling, verdictText(p), where(p), p.FeasibleNodes, p.Message)
		}
		fmt.Fprintln(tw)
	}
	for _, t := range r.Topologies {
		fmt.Fprintf(tw, "TOPOLOGY %s (%d replicas): %s\n", t.Name, t.Replicas, topologyVerdictText(t))
		fmt.Fprintln(tw, "ROLE\tREPLICAS\tVERDICT\tPLACED IN\tWHY NOT")
		for _, g := range t.Groups {
			v := string(g.Verdict)
			if g.Verdict == Uncertain {
				v += map[bool]string{true: " (fits as planned)", false: " (does not fit as planned)"}[g.AssumedFits]
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", g.Role, g.Indexes, v, poolCountsText(g.Pools), g.Message)
		}
		for _, m := range t.Missing {
			fmt.Fprintf(tw, "  missing: %s\n", m)
		}
		fmt.Fprintln(tw)
	}
	if len(r.Canary) > 0 {
		fmt.Fprintln(tw, "CANARY\tPOD\tSCHEDULED\tNODE\tSECONDS\tWHY NOT")
		for _, c := range r.Canary {
			why := c.Message
			if !c.Deleted {
				why += " (NOT DELETED: kubectl delete pod " + c.Pod + ")"
			}
			fmt.Fprintf(tw, "%s\t%s\t%t\t%s\t%.1f\t%s\n", c.Category, c.Pod, c.Scheduled, orDash(c.Node), c.Seconds, why)
		}
		fmt.Fprintln(tw)
	}
	writeRunsQuota(tw, r.RunsQuota)
	s := r.Summary
	status := "OK"
	if !s.OK {
		status = "DOES NOT FIT"
	}
	fmt.Fprintf(tw, "SUMMARY: %s: %s\n", status, s)
	if s.Uncertain > 0 {
		fmt.Fprintln(tw, "  uncertain: the outcome depends on scheduler scoring or an unevaluated constraint; see -o json notes")
	}
	return tw.Flush()
}

func writePodLine(tw io.Writer, p PodResult, name string) {
	kind := p.Kind
	if p.Placement != "" {
		kind += " " + p.Placement
	}
	feasible := fmt.Sprintf("%d", p.FeasibleNodes)
	if p.DaemonSet != nil {
		feasible = fmt.Sprintf("%d/%d", p.DaemonSet.Fitting, p.DaemonSet.EligibleNodes)
	}
	fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", name, kind, requestsText(p.Requests), verdictText(p), where(p), feasible, p.Message)
}

func verdictText(p PodResult) string {
	if p.Verdict == Uncertain {
		if p.AssumedFits {
			return "uncertain (fits as planned)"
		}
		return "uncertain (does not fit as planned)"
	}
	return string(p.Verdict)
}

func topologyVerdictText(t TopologyResult) string {
	switch t.Verdict {
	case Fits:
		return "fits now"
	case Unschedulable:
		return "does not fit"
	}
	if t.AssumedFits {
		return "uncertain (fits as planned)"
	}
	return "uncertain (does not fit as planned)"
}

// where is the node when certain, otherwise the pool(s) the pod can go to.
func where(p PodResult) string {
	if p.Node != "" {
		return p.Node
	}
	if !p.AssumedFits {
		return "-"
	}
	return poolCountsText(p.Pools)
}

func poolCountsText(ps []PoolCount) string {
	if len(ps) == 0 {
		return "-"
	}
	parts := make([]string, 0, len(ps))
	for i, p := range ps {
		if i == 3 {
			parts = append(parts, fmt.Sprintf("+%d more", len(ps)-3))
			break
		}
		parts = append(parts, fmt.Sprintf("%s (%d)", p.Pool, p.Nodes))
	}
	return strings.Join(parts, ", ")
}

func requestsText(m map[string]string) string {
	if len(m) == 0 {
		return "-"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return resourceOrder(keys[i]) < resourceOrder(keys[j]) })
	parts := make([]string, len(keys))
	for i, k := range keys {
		short := k
		if k == "nvidia.com/gpu" {
			short = "gpu"
		}
		parts[i] = short + "=" + m[k]
	}
	return strings.Join(parts, ",")
}

func resourceOrder(k string) string {
	switch k {
	case "cpu":
		return "0"
	case "memory":
		return "1"
	case "ephemeral-storage":
		return "2"
	}
	return "3" + k
}

func gpuText(p PoolSummary) string {
	var parts []string
	for k, v := range p.Allocatable {
		if strings.Contains(k, "gpu") {
			parts = append(parts, p.Free[k]+"/"+v)
		}
	}
	sort.Strings(parts)
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ",")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
