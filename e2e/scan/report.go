// Package scan is the gate that `make scan` puts on the chart: it reads the JSON report of
// `trivy config` over rendered manifests, matches the failed checks against a checked-in
// ignore file, and says which findings fail the gate.
//
// Each rendered object is scanned as its own file named by ObjectFile, so a finding is tied
// to its Kind/name by the file it came from rather than by parsing trivy's messages.
package scan

import (
	"encoding/json"
	"fmt"
	"path"
	"strings"
)

// Severities in trivy's order, most severe first.
var Severities = []string{"CRITICAL", "HIGH", "MEDIUM", "LOW"}

// gating reports whether a finding of this severity fails the gate unless ignored.
func gating(severity string) bool { return severity == "CRITICAL" || severity == "HIGH" }

// Finding is one failed check on one object of one render.
type Finding struct {
	Render   string // the render's directory, e.g. production or production+ssl-ingress
	Object   string // Kind/name
	CheckID  string // e.g. KSV-0014
	Severity string
	Title    string
	Message  string
}

func (f Finding) key() findingKey { return findingKey{CheckID: f.CheckID, Object: f.Object} }

type findingKey struct{ CheckID, Object string }

// Counts are trivy's own tallies of the checks it ran on an object.
type Counts struct{ Successes, Failures int }

// Report is a parsed trivy report: the failed checks, and the tallies by render and object.
type Report struct {
	Findings []Finding
	Checks   map[string]map[string]Counts // render -> Kind/name -> counts
}

// ObjectFile is the file name a rendered object is written to before the scan: Kind.name.yaml
// (a Kind has no dot; a name may, e.g. a CRD's).
func ObjectFile(kind, name string) string { return kind + "." + name + ".yaml" }

// objectOfFile inverts ObjectFile: "Role.polyaxon-agent.yaml" is Role/polyaxon-agent.
func objectOfFile(file string) (string, bool) {
	kind, name, ok := strings.Cut(strings.TrimSuffix(file, ".yaml"), ".")
	if !ok || kind == "" || name == "" || !strings.HasSuffix(file, ".yaml") {
		return "", false
	}
	return kind + "/" + name, true
}

// trivyReport is the part of trivy's JSON report (pkg/types.Report) the gate reads.
type trivyReport struct {
	Results []struct {
		Target         string
		MisconfSummary *struct{ Successes, Failures int }
		// Only failures are listed unless --include-non-failures is given; Status says which.
		Misconfigurations []struct {
			ID, Title, Message, Severity, Status string
		}
	}
}

// ParseReport reads `trivy config --format json DIR` run over a directory holding one
// sub-directory per render, each with one ObjectFile per object. A result outside that layout
// is an error: the gate would not know which object to blame.
func ParseReport(data []byte) (*Report, error) {
	var tr trivyReport
	if err := json.Unmarshal(data, &tr); err != nil {
		return nil, fmt.Errorf("decoding trivy's JSON report: %w", err)
	}
	rep := &Report{Checks: map[string]map[string]Counts{}}
	for _, r := range tr.Results {
		render, file := path.Split(path.Clean(r.Target))
		render = strings.TrimSuffix(render, "/")
		object, ok := objectOfFile(file)
		if render == "" || strings.Contains(render, "/") || !ok {
			return nil, fmt.Errorf("trivy result for %q: want <render>/<Kind>.<name>.yaml", r.Target)
		}
		if rep.Checks[render] == nil {
			rep.Checks[render] = map[string]Counts{}
		}
		if s := r.MisconfSummary; s != nil {
			rep.Checks[render][object] = Counts{Successes: s.Successes, Failures: s.Failures}
		}
		for _, m := range r.Misconfigurations {
			if m.Status != "" && m.Status != "FAIL" {
				continue
			}
			rep.Findings = append(rep.Findings, Finding{
				Render: render, Object: object, CheckID: m.ID,
				Severity: m.Severity, Title: m.Title, Message: m.Message,
			})
		}
	}
	return rep, nil
}
