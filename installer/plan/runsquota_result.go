package plan

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// RunsQuota is what the release bounds runs with in their namespace, as it would render it:
// what all runs together may hold (its ResourceQuota) and one run container's defaults and
// max (its LimitRange), and what of it the run pools sized (SizeRunPools).
type RunsQuota struct {
	Namespace string `json:"namespace"`
	// SizedFrom are the run pools whose nodes sized the totals and the max, each with the
	// number of its nodes; empty when nothing was sized.
	SizedFrom []PoolCount `json:"sizedFrom,omitempty"`
	// Sized are the values the pools gave (value path to value), under the user's values.
	Sized map[string]string `json:"sized,omitempty"`
	// Hard is the ResourceQuota's spec.hard.
	Hard map[string]string `json:"hard"`
	// DefaultRequest, Default and Max are the LimitRange's, for one container.
	DefaultRequest map[string]string `json:"defaultRequest,omitempty"`
	Default        map[string]string `json:"default,omitempty"`
	Max            map[string]string `json:"max,omitempty"`
}

// RunsQuotaOf reads the runs' ResourceQuota and LimitRange of a rendered release in the runs'
// namespace (RunsNamespace); nil when it renders none (runs in the release's namespace).
func RunsQuotaOf(objs []runtime.Object, release string) *RunsQuota {
	ns := RunsNamespace(objs, release)
	var out *RunsQuota
	for _, o := range objs {
		if q, ok := o.(*corev1.ResourceQuota); ok && q.Namespace == ns && q.Labels["app.kubernetes.io/component"] == "runs" {
			out = &RunsQuota{Namespace: ns, Hard: quantityText(q.Spec.Hard)}
		}
	}
	if out == nil {
		return nil
	}
	for _, o := range objs {
		l, ok := o.(*corev1.LimitRange)
		if !ok || l.Namespace != ns || l.Labels["app.kubernetes.io/component"] != "runs" {
			continue
		}
		for _, item := range l.Spec.Limits {
			if item.Type == corev1.LimitTypeContainer {
				out.DefaultRequest, out.Default, out.Max = quantityText(item.DefaultRequest), quantityText(item.Default), quantityText(item.Max)
			}
		}
	}
	return out
}

func quantityText(l corev1.ResourceList) map[string]string {
	if len(l) == 0 {
		return nil
	}
	out := make(map[string]string, len(l))
	for k, v := range l {
		out[string(k)] = v.String()
	}
	return out
}

// writeRunsQuota prints the runs' quota: where its totals come from, spec.hard, and one
// container's defaults and max.
func writeRunsQuota(tw io.Writer, q *RunsQuota) {
	if q == nil {
		return
	}
	from := "not sized from the run pools: the values' totals"
	if len(q.SizedFrom) > 0 {
		from = "totals and max sized from the run pools " + poolCountsText(q.SizedFrom) + ", under the values you set"
	}
	fmt.Fprintf(tw, "RUNS QUOTA in namespace %s (%s)\n", q.Namespace, from)
	fmt.Fprintln(tw, "ALL RUNS\tAT MOST")
	for _, k := range slices.SortedFunc(maps.Keys(q.Hard), func(a, b string) int { return strings.Compare(hardOrder(a), hardOrder(b)) }) {
		fmt.Fprintf(tw, "%s\t%s\n", k, q.Hard[k])
	}
	fmt.Fprintln(tw)
	names := map[string]bool{}
	for _, m := range []map[string]string{q.DefaultRequest, q.Default, q.Max} {
		for k := range m {
			names[k] = true
		}
	}
	if len(names) == 0 {
		return
	}
	fmt.Fprintln(tw, "RUN CONTAINER\tDEFAULT REQUEST\tDEFAULT LIMIT\tMAX")
	for _, r := range slices.SortedFunc(maps.Keys(names), func(a, b string) int { return strings.Compare(resourceOrder(a), resourceOrder(b)) }) {
		limit := q.Default[r]
		if limit == "" && q.Max[r] != "" {
			limit = "max" // the API server gives a container without a limit the max
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r, orDash(q.DefaultRequest[r]), orDash(limit), orDash(q.Max[r]))
	}
	fmt.Fprintln(tw)
}

// hardOrder sorts spec.hard: compute resources first (cpu, memory, disk, the rest; requests
// before limits), then pods, claims and Services, then object counts.
func hardOrder(k string) string {
	switch r := strings.TrimPrefix(strings.TrimPrefix(k, "requests."), "limits."); {
	case strings.HasPrefix(k, "count/"):
		return "9" + k
	case r != k && strings.HasPrefix(k, "requests."):
		return "0" + resourceOrder(r) + " 0"
	case r != k:
		return "0" + resourceOrder(r) + " 1"
	}
	return "5" + k
}
