// Package output prints command results on stdout in one schema for every command
// (-o table|json|yaml) and human progress on stderr.
package output

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"reflect"
	"slices"
	"strings"
	"text/tabwriter"

	"sigs.k8s.io/yaml"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/check"
)

// Format is the -o value.
type Format string

const (
	FormatTable Format = "table"
	FormatJSON  Format = "json"
	FormatYAML  Format = "yaml"
)

// Formats lists the accepted -o values.
var Formats = []Format{FormatTable, FormatJSON, FormatYAML}

// ParseFormat validates an -o value ("" means table).
func ParseFormat(s string) (Format, error) {
	switch Format(strings.ToLower(strings.TrimSpace(s))) {
	case "", FormatTable:
		return FormatTable, nil
	case FormatJSON:
		return FormatJSON, nil
	case FormatYAML, "yml":
		return FormatYAML, nil
	}
	return "", fmt.Errorf("unknown output format %q: use -o table, -o json or -o yaml", s)
}

// Status is the overall outcome of a command.
type Status string

const (
	StatusOK      Status = "ok"      // success
	StatusWarning Status = "warning" // success with warnings
	StatusFailed  Status = "failed"  // a check failed, or the action failed cleanly
	StatusError   Status = "error"   // the command could not do its job
)

// APIVersion and Kind identify the result schema; bump APIVersion on incompatible changes.
const (
	APIVersion = "polyaxon-deploy/v1"
	Kind       = "Result"
)

// Result is the one schema every command prints with -o json|yaml.
type Result struct {
	APIVersion string         `json:"apiVersion"`
	Kind       string         `json:"kind"`
	Command    string         `json:"command"`
	Status     Status         `json:"status"`
	Release    *Release       `json:"release,omitempty"`
	Checks     []check.Result `json:"checks,omitempty"`
	Warnings   []string       `json:"warnings,omitempty"`
	Error      string         `json:"error,omitempty"`
	// Data is the command's own payload (manifests, plan, history, ...).
	Data any `json:"data,omitempty"`
	// Notes are the chart NOTES (install, upgrade).
	Notes string `json:"notes,omitempty"`
	// DebugLog is the path of the debug log, when one was written.
	DebugLog string `json:"debugLog,omitempty"`
}

// Release identifies the release a command acted on.
type Release struct {
	Name         string `json:"name"`
	Namespace    string `json:"namespace"`
	Revision     int    `json:"revision,omitempty"`
	Status       string `json:"status,omitempty"` // Helm release status (deployed, failed, ...)
	Chart        string `json:"chart,omitempty"`  // polyaxon-2.15.1
	ChartVersion string `json:"chartVersion,omitempty"`
	AppVersion   string `json:"appVersion,omitempty"`
	Profile      string `json:"profile,omitempty"`
}

// NewResult starts a result for command.
func NewResult(command string, status Status) *Result {
	return &Result{APIVersion: APIVersion, Kind: Kind, Command: command, Status: status}
}

// WithData sets the payload.
func (r *Result) WithData(d any) *Result { r.Data = d; return r }

// WithChecks sets the check results and derives the status from them (unless already error).
func (r *Result) WithChecks(rep check.Report) *Result {
	r.Checks = rep.Results
	if r.Status == StatusError {
		return r
	}
	switch {
	case rep.Failed():
		r.Status = StatusFailed
	case rep.Warned() && r.Status == StatusOK:
		r.Status = StatusWarning
	}
	return r
}

// WithError records err and sets the error status.
func (r *Result) WithError(err error) *Result {
	if err != nil {
		r.Error, r.Status = err.Error(), StatusError
	}
	return r
}

// Tabler is implemented by payloads with a table form.
type Tabler interface {
	Table() (headers []string, rows [][]string)
}

// Printer writes results to stdout.
type Printer struct {
	out     io.Writer
	format  Format
	printed bool
}

// Printed reports whether a result was printed (so a failing command can print an error
// result instead when none was).
func (p *Printer) Printed() bool { return p.printed }

// NewPrinter returns a printer.
func NewPrinter(out io.Writer, f Format) *Printer { return &Printer{out: out, format: f} }

// Format is the printer's format.
func (p *Printer) Format() Format { return p.format }

// Structured reports whether results are machine-readable (json, yaml).
func (p *Printer) Structured() bool { return p.format != FormatTable }

// Print writes r in the printer's format.
func (p *Printer) Print(r *Result) error {
	p.printed = true
	switch p.format {
	case FormatJSON:
		enc := json.NewEncoder(p.out)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	case FormatYAML:
		b, err := yaml.Marshal(r)
		if err != nil {
			return err
		}
		_, err = p.out.Write(b)
		return err
	}
	return p.table(r)
}

// table is the human form on stdout: check results (if any), then the payload.
func (p *Printer) table(r *Result) error {
	tw := tabwriter.NewWriter(p.out, 0, 4, 2, ' ', 0)
	if len(r.Checks) > 0 {
		fmt.Fprintln(tw, "CHECK\tSTATUS\tDETAIL")
		for _, c := range r.Checks {
			st := string(c.Status)
			if c.Ignored {
				st += " (ignored)"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\n", c.ID, st, oneLine(c.Detail))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if r.Data != nil {
		if len(r.Checks) > 0 {
			fmt.Fprintln(p.out)
		}
		if err := writeData(p.out, r.Data); err != nil {
			return err
		}
	}
	if r.Notes != "" {
		fmt.Fprintf(p.out, "\n%s\n", r.Notes)
	}
	return nil
}

func writeData(w io.Writer, d any) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	switch t := d.(type) {
	case Tabler:
		h, rows := t.Table()
		if len(h) > 0 {
			fmt.Fprintln(tw, strings.Join(h, "\t"))
		}
		for _, row := range rows {
			fmt.Fprintln(tw, strings.Join(row, "\t"))
		}
		return tw.Flush()
	case string:
		_, err := fmt.Fprintln(w, strings.TrimRight(t, "\n"))
		return err
	}
	// Generic payloads: a map or struct as KEY  VALUE lines; anything else as YAML.
	var m map[string]any
	raw, err := json.Marshal(d)
	if err == nil && json.Unmarshal(raw, &m) == nil && flat(m) {
		keys := slices.Sorted(maps.Keys(m))
		for _, k := range keys {
			fmt.Fprintf(tw, "%s\t%v\n", k, m[k])
		}
		return tw.Flush()
	}
	b, err := yaml.Marshal(d)
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

func flat(m map[string]any) bool {
	if m == nil {
		return false
	}
	for _, v := range m {
		if v == nil {
			continue
		}
		switch reflect.TypeOf(v).Kind() {
		case reflect.Map, reflect.Slice:
			return false
		}
	}
	return true
}

func oneLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " …"
	}
	return s
}
