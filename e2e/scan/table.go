package scan

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
)

// WriteTable prints, per render, the findings by severity, the findings that fail the gate
// and the ignored ones; then the stale ignore entries and a one-line verdict. ignoreFile
// names the file in the messages. A check failing several times on one object (once per
// container) is one row with its count in N.
func (r *Result) WriteTable(w io.Writer, ignoreFile string) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	p := func(format string, a ...any) { fmt.Fprintf(tw, format, a...) }
	for _, rr := range r.Renders {
		found := 0
		for _, n := range rr.Found {
			found += n
		}
		p("RENDER %s: %d objects, %d findings, %d fail the gate\n", rr.Render, rr.Objects, found, len(rr.Failing))
		p("SEVERITY\tFOUND\tIGNORED\tFAILING\n")
		failing := map[string]int{}
		for _, f := range rr.Failing {
			failing[f.Severity]++
		}
		for _, s := range Severities {
			fail := "-"
			if gating(s) {
				fail = strconv.Itoa(failing[s])
			}
			p("%s\t%d\t%d\t%s\n", s, rr.Found[s], rr.Ignored[s], fail)
		}
		if len(rr.Failing) > 0 {
			p("\nFAILING\tCHECK\tOBJECT\tN\tTITLE\n")
			for _, g := range group(rr.Failing, nil) {
				p("%s\t%s\t%s\t%d\t%s\n", g.Severity, g.CheckID, g.Object, g.n, g.Title)
			}
		}
		if len(rr.Accepted) > 0 {
			p("\nIGNORED\tCHECK\tOBJECT\tN\tREASON\n")
			for _, g := range group(nil, rr.Accepted) {
				p("%s\t%s\t%s\t%d\t%s\n", g.Severity, g.CheckID, g.Object, g.n, g.reason)
			}
		}
		p("\n")
	}
	if len(r.Stale) > 0 {
		p("STALE: entries of %s that matched nothing (remove them)\n", ignoreFile)
		p("LINE\tCHECK\tOBJECT\tREASON\n")
		for _, ig := range r.Stale {
			p("%d\t%s\t%s\t%s\n", ig.Line, ig.CheckID, ig.Object, ig.Reason)
		}
		p("\n")
	}
	verdict := "OK"
	if !r.Passed() {
		verdict = "FAIL"
	}
	p("SUMMARY: %s: %d renders, %d findings fail the gate (HIGH or CRITICAL, not in %s), %d stale ignore entries\n",
		verdict, len(r.Renders), r.FailingCount(), ignoreFile, len(r.Stale))
	return tw.Flush()
}

type row struct {
	Finding
	reason string
	n      int
}

// group folds findings of one check on one object into one row, keeping their order.
func group(fs []Finding, accepted []IgnoredFinding) []row {
	var rows []row
	at := map[findingKey]int{}
	add := func(f Finding, reason string) {
		if i, ok := at[f.key()]; ok {
			rows[i].n++
			return
		}
		at[f.key()] = len(rows)
		rows = append(rows, row{Finding: f, reason: oneLine(reason), n: 1})
	}
	for _, f := range fs {
		add(f, "")
	}
	for _, a := range accepted {
		add(a.Finding, a.Reason)
	}
	return rows
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
