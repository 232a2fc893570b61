package output_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/check"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/output"
)

func sampleReport() check.Report {
	return check.Report{Results: []check.Result{
		{ID: "kube-api", Category: "cluster", Description: "the API is reachable", Severity: check.Fatal, Status: check.Passed, Detail: "Kubernetes v1.37.2"},
		{ID: "rbac", Category: "permissions", Description: "RBAC", Severity: check.Error, Status: check.Warned, Ignored: true, Detail: "cannot create deployments.apps", Hint: "ask", Docs: check.DocsBase + "check-rbac"},
		{ID: "dry-run", Category: "validation", Description: "dry-run", Severity: check.Error, Status: check.Failed, Detail: "line one\nline two", Hint: "fix values"},
	}}
}

func TestParseFormat(t *testing.T) {
	for in, want := range map[string]output.Format{"": output.FormatTable, "table": output.FormatTable, "JSON": output.FormatJSON, "yaml": output.FormatYAML, "yml": output.FormatYAML} {
		got, err := output.ParseFormat(in)
		require.NoError(t, err)
		assert.Equal(t, want, got)
	}
	_, err := output.ParseFormat("xml")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "-o table, -o json or -o yaml")
}

// The schema is a contract (scripts parse it): pin the field names.
func TestResultSchemaJSONAndYAML(t *testing.T) {
	r := output.NewResult("check", output.StatusOK).WithChecks(sampleReport())
	r.Release = &output.Release{Name: "polyaxon", Namespace: "ml", Profile: "production"}
	r.Warnings = []string{"legacy"}
	r.WithData(map[string]any{"k": "v"})
	assert.Equal(t, output.StatusFailed, r.Status, "a failed check fails the result")

	var buf bytes.Buffer
	require.NoError(t, output.NewPrinter(&buf, output.FormatJSON).Print(r))
	var doc map[string]any
	require.NoError(t, json.Unmarshal(buf.Bytes(), &doc))
	assert.Equal(t, "polyaxon-deploy/v1", doc["apiVersion"])
	assert.Equal(t, "Result", doc["kind"])
	assert.Equal(t, "check", doc["command"])
	assert.Equal(t, "failed", doc["status"])
	assert.Equal(t, map[string]any{"name": "polyaxon", "namespace": "ml", "profile": "production"}, doc["release"])
	checks := doc["checks"].([]any)
	require.Len(t, checks, 3)
	rbac := checks[1].(map[string]any)
	for _, k := range []string{"id", "category", "description", "severity", "status", "detail", "hint", "docs", "ignored"} {
		assert.Contains(t, rbac, k)
	}
	assert.Equal(t, "warning", rbac["status"])
	assert.Equal(t, map[string]any{"k": "v"}, doc["data"])

	buf.Reset()
	require.NoError(t, output.NewPrinter(&buf, output.FormatYAML).Print(r))
	var ydoc map[string]any
	require.NoError(t, yaml.Unmarshal(buf.Bytes(), &ydoc))
	assert.Equal(t, doc, ydoc, "json and yaml carry the same document")
}

func TestResultStatus(t *testing.T) {
	warnOnly := check.Report{Results: []check.Result{{ID: "a", Status: check.Passed}, {ID: "b", Status: check.Warned}}}
	assert.Equal(t, output.StatusWarning, output.NewResult("c", output.StatusOK).WithChecks(warnOnly).Status)
	assert.Equal(t, output.StatusError, output.NewResult("c", output.StatusOK).WithError(errors.New("x")).WithChecks(warnOnly).Status)
	assert.Equal(t, output.StatusOK, output.NewResult("c", output.StatusOK).WithChecks(check.Report{}).Status)
}

type rows struct{}

func (rows) Table() ([]string, [][]string) {
	return []string{"NAME", "VALUE"}, [][]string{{"gateway", "2"}, {"postgresql", "1"}}
}

func TestTable(t *testing.T) {
	var buf bytes.Buffer
	r := output.NewResult("status", output.StatusOK).WithChecks(sampleReport()).WithData(rows{})
	r.Notes = "Polyaxon is installed."
	require.NoError(t, output.NewPrinter(&buf, output.FormatTable).Print(r))
	out := buf.String()
	assert.Contains(t, out, "CHECK")
	assert.Contains(t, out, "rbac      warning (ignored)")
	assert.Contains(t, out, "line one …", "details stay on one line")
	assert.NotContains(t, out, "line two")
	assert.Contains(t, out, "NAME        VALUE\ngateway     2\n")
	assert.True(t, strings.HasSuffix(out, "Polyaxon is installed.\n"))

	buf.Reset()
	require.NoError(t, output.NewPrinter(&buf, output.FormatTable).Print(output.NewResult("version", output.StatusOK).WithData(struct {
		Version string `json:"version"`
	}{"v1"})))
	assert.Equal(t, "version  v1\n", buf.String())
}

func TestCheckObserverMarks(t *testing.T) {
	var buf bytes.Buffer
	obs := output.NewCheckObserver(output.NewProgress(&buf))
	for _, r := range sampleReport().Results {
		obs.Finished(r)
	}
	obs.Finished(check.Result{ID: "gpu", Category: "validation", Description: "GPUs", Status: check.Skipped, Detail: "none asked"})
	out := buf.String()
	assert.Contains(t, out, "cluster\n-------\n√ the API is reachable: Kubernetes v1.37.2\n")
	assert.Contains(t, out, "‼ RBAC [rbac, ignored]\n    cannot create deployments.apps\n    fix: ask\n    see "+check.DocsBase+"check-rbac\n")
	assert.Contains(t, out, "× dry-run [dry-run]\n    line one\n    line two\n    fix: fix values\n")
	assert.Contains(t, out, "- GPUs (skipped: none asked)\n")
}

// TestEventProgressWritesOneJSONEventPerLine: with -o json|yaml a script reads stderr as JSON
// events: each mark's kind, free text a line each (a partial line waits for its end, an
// indented line keeps its indentation), messages left readable.
func TestEventProgressWritesOneJSONEventPerLine(t *testing.T) {
	var buf bytes.Buffer
	p := output.NewEventProgress(&buf)
	assert.True(t, p.Events())
	p.Step("Upgrading release polyaxon")
	w := p.Writer()
	fmt.Fprint(w, "waiting for workloads (12s of 15m0s): 1 of 2 ")
	fmt.Fprint(w, "ready; Deployment polyaxon-gateway: Updated: 1/2\n\n  gateway.replicas: 3 -> 2\n")
	obs := output.NewCheckObserver(p)
	for _, r := range sampleReport().Results {
		obs.Finished(r)
	}
	p.Fail("Error: <namespace> is gone")

	var events []output.Event
	for _, line := range strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n") {
		var e output.Event
		require.NoError(t, json.Unmarshal([]byte(line), &e), "a line that is not an event: %q", line)
		assert.False(t, e.Time.IsZero())
		events = append(events, e)
	}
	kinds := make([]string, len(events))
	for i, e := range events {
		kinds[i] = e.Kind
	}
	assert.Equal(t, []string{"step", "info", "info", "ok", "warning", "failure", "failure"}, kinds)
	assert.Equal(t, "waiting for workloads (12s of 15m0s): 1 of 2 ready; Deployment polyaxon-gateway: Updated: 1/2", events[1].Message)
	assert.Equal(t, "  gateway.replicas: 3 -> 2", events[2].Message)
	assert.Equal(t, "the API is reachable: Kubernetes v1.37.2", events[3].Message)
	assert.Contains(t, events[4].Message, "RBAC [rbac, ignored]\n  cannot create deployments.apps")
	assert.Contains(t, buf.String(), `"message":"Error: <namespace> is gone"`, "no HTML escaping")
	assert.NotContains(t, buf.String(), "cluster\n-------", "no category headers among events")
}
