package scan

import (
	"fmt"
	"sort"
	"strings"
)

// Render is one render that was scanned: its directory and the objects written into it.
type Render struct {
	Name    string
	Objects []string // Kind/name
}

// IgnoredFinding is a finding covered by an ignore entry.
type IgnoredFinding struct {
	Finding
	Reason string
}

// RenderResult is the gate's verdict on one render.
type RenderResult struct {
	Render  string
	Objects int
	// Checks sums trivy's tallies over the objects (each check counts once per object).
	Checks Counts
	// Found counts every failed check by severity, ignored or not.
	Found map[string]int
	// Ignored counts the ignored ones by severity.
	Ignored map[string]int
	// Failing are the HIGH and CRITICAL findings no entry covers: each fails the gate.
	Failing []Finding
	// Accepted are the findings an entry covers, with its reason.
	Accepted []IgnoredFinding
}

// Result is the gate's verdict on every render.
type Result struct {
	Renders []RenderResult
	// Stale are ignore entries that matched no finding in any render: the chart changed and
	// the entry would hide a future regression, so they fail the gate too.
	Stale []Ignore
}

// Passed reports whether the gate lets the chart through.
func (r *Result) Passed() bool { return r.FailingCount() == 0 && len(r.Stale) == 0 }

// FailingCount is the number of findings that fail the gate, over every render.
func (r *Result) FailingCount() int {
	n := 0
	for _, rr := range r.Renders {
		n += len(rr.Failing)
	}
	return n
}

// Evaluate matches the report's findings against the ignore entries, for the renders given
// (in that order). An object that trivy ran no check on is an error, not a pass: a manifest
// trivy does not recognise as Kubernetes (a document starting with "---", say) would
// otherwise look clean.
func Evaluate(rep *Report, renders []Render, ignores []Ignore) (*Result, error) {
	byKey := map[findingKey]Ignore{}
	for _, ig := range ignores {
		byKey[ig.key()] = ig
	}
	used := map[findingKey]bool{}
	res := &Result{}
	index := map[string]int{}
	for _, r := range renders {
		rr := RenderResult{Render: r.Name, Objects: len(r.Objects), Found: map[string]int{}, Ignored: map[string]int{}}
		var unchecked []string
		for _, obj := range r.Objects {
			c := rep.Checks[r.Name][obj]
			if c.Successes+c.Failures == 0 {
				unchecked = append(unchecked, obj)
			}
			rr.Checks.Successes += c.Successes
			rr.Checks.Failures += c.Failures
		}
		if len(r.Objects) == 0 {
			return nil, fmt.Errorf("render %s: no objects were scanned", r.Name)
		}
		if len(unchecked) > 0 {
			return nil, fmt.Errorf("render %s: trivy ran no check on %d of its %d objects (%s): not recognised as Kubernetes manifests?",
				r.Name, len(unchecked), len(r.Objects), strings.Join(unchecked, ", "))
		}
		index[r.Name] = len(res.Renders)
		res.Renders = append(res.Renders, rr)
	}
	for _, f := range rep.Findings {
		i, ok := index[f.Render]
		if !ok {
			return nil, fmt.Errorf("trivy reported on %s/%s, which is not one of the renders scanned", f.Render, f.Object)
		}
		rr := &res.Renders[i]
		rr.Found[f.Severity]++
		if ig, ok := byKey[f.key()]; ok {
			used[f.key()] = true
			rr.Ignored[f.Severity]++
			rr.Accepted = append(rr.Accepted, IgnoredFinding{Finding: f, Reason: ig.Reason})
			continue
		}
		if gating(f.Severity) {
			rr.Failing = append(rr.Failing, f)
		}
	}
	for _, ig := range ignores {
		if !used[ig.key()] {
			res.Stale = append(res.Stale, ig)
		}
	}
	for i := range res.Renders {
		sortFindings(res.Renders[i].Failing)
		sort.SliceStable(res.Renders[i].Accepted, func(a, b int) bool {
			return less(res.Renders[i].Accepted[a].Finding, res.Renders[i].Accepted[b].Finding)
		})
	}
	return res, nil
}

func sortFindings(fs []Finding) {
	sort.SliceStable(fs, func(a, b int) bool { return less(fs[a], fs[b]) })
}

// less orders by severity (most severe first), then check, then object.
func less(a, b Finding) bool {
	if ra, rb := rank(a.Severity), rank(b.Severity); ra != rb {
		return ra < rb
	}
	if a.CheckID != b.CheckID {
		return a.CheckID < b.CheckID
	}
	return a.Object < b.Object
}

func rank(severity string) int {
	for i, s := range Severities {
		if s == severity {
			return i
		}
	}
	return len(Severities)
}
