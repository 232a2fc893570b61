package scan

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The fixture is trivy's JSON shape over two renders:
//
//	production:             Role/polyaxon-agent KSV-0056 HIGH, KSV-0049 MEDIUM;
//	                        Deployment/polyaxon-gateway KSV-0014 HIGH x2 (two containers), KSV-0011 LOW;
//	                        Service/polyaxon-gateway clean
//	production+ssl-ingress: Role/polyaxon-agent KSV-0056 HIGH;
//	                        ConfigMap/polyaxon-config KSV-01010 MEDIUM (and a PASS entry)
var renders = []Render{
	{Name: "production", Objects: []string{"Role/polyaxon-agent", "Deployment/polyaxon-gateway", "Service/polyaxon-gateway"}},
	{Name: "production+ssl-ingress", Objects: []string{"Role/polyaxon-agent", "ConfigMap/polyaxon-config"}},
}

func fixture(t *testing.T) *Report {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "report.json"))
	require.NoError(t, err)
	rep, err := ParseReport(data)
	require.NoError(t, err)
	return rep
}

func ignoresOf(t *testing.T, text string) []Ignore {
	t.Helper()
	ig, err := ParseIgnore([]byte(text))
	require.NoError(t, err)
	return ig
}

func TestIgnoredHighFindingDoesNotFail(t *testing.T) {
	res, err := Evaluate(fixture(t), renders, ignoresOf(t, `
KSV-0056  Role/polyaxon-agent  the runner creates Services for notebooks and tensorboards
KSV-0014  Deployment/polyaxon-gateway  the image writes under /polyaxon
`))
	require.NoError(t, err)
	assert.True(t, res.Passed(), "every HIGH finding is ignored")
	assert.Empty(t, res.Stale)
	prod := res.Renders[0]
	assert.Equal(t, 3, prod.Found["HIGH"])
	assert.Equal(t, 3, prod.Ignored["HIGH"])
	require.Len(t, prod.Accepted, 3)
	assert.Equal(t, "KSV-0014", prod.Accepted[0].CheckID)
	assert.Equal(t, "KSV-0056", prod.Accepted[2].CheckID)
	assert.Equal(t, "the runner creates Services for notebooks and tensorboards", prod.Accepted[2].Reason)
	// One entry covers the finding in every render it shows up in.
	assert.Equal(t, 1, res.Renders[1].Ignored["HIGH"])
}

func TestHighFindingNotIgnoredFails(t *testing.T) {
	res, err := Evaluate(fixture(t), renders, ignoresOf(t, `
KSV-0056  Role/polyaxon-agent  the runner creates Services for notebooks and tensorboards
`))
	require.NoError(t, err)
	assert.False(t, res.Passed())
	assert.Equal(t, 2, res.FailingCount(), "KSV-0014 on both gateway containers")
	for _, f := range res.Renders[0].Failing {
		assert.Equal(t, "KSV-0014", f.CheckID)
		assert.Equal(t, "Deployment/polyaxon-gateway", f.Object)
		assert.Equal(t, "Root file system is not read-only", f.Title)
	}
	assert.Empty(t, res.Renders[1].Failing)
}

func TestIgnoreEntryCoversOnlyItsObject(t *testing.T) {
	// The same check on another object is not covered.
	res, err := Evaluate(fixture(t), renders, ignoresOf(t, `
KSV-0056  Role/polyaxon-agent  inherent
KSV-0014  Deployment/polyaxon-worker  another Deployment
`))
	require.NoError(t, err)
	assert.False(t, res.Passed())
	assert.Equal(t, 2, res.FailingCount())
	require.Len(t, res.Stale, 1)
	assert.Equal(t, "Deployment/polyaxon-worker", res.Stale[0].Object)
}

func TestStaleIgnoreEntryFails(t *testing.T) {
	res, err := Evaluate(fixture(t), renders, ignoresOf(t, `
KSV-0056  Role/polyaxon-agent  inherent
KSV-0014  Deployment/polyaxon-gateway  not yet read-only
# fixed in the chart since: this entry now hides nothing and must go
KSV-0053  Role/polyaxon-agent  exec into run pods
`))
	require.NoError(t, err)
	assert.Equal(t, 0, res.FailingCount())
	assert.False(t, res.Passed(), "a stale entry fails the gate")
	require.Len(t, res.Stale, 1)
	assert.Equal(t, Ignore{CheckID: "KSV-0053", Object: "Role/polyaxon-agent", Reason: "exec into run pods", Line: 5}, res.Stale[0])
}

func TestMediumAndLowFindingsDoNotFail(t *testing.T) {
	data := []byte(`{"Results": [{"Target": "development/Deployment.polyaxon-gateway.yaml",
	  "MisconfSummary": {"Successes": 40, "Failures": 3},
	  "Misconfigurations": [
	    {"ID": "KSV-0125", "Title": "Restrict container images to trusted registries", "Severity": "MEDIUM", "Status": "FAIL"},
	    {"ID": "KSV-0011", "Title": "CPU not limited", "Severity": "LOW", "Status": "FAIL"},
	    {"ID": "KSV-0020", "Title": "Runs with UID <= 10000", "Severity": "LOW", "Status": "FAIL"}]}]}`)
	rep, err := ParseReport(data)
	require.NoError(t, err)
	dev := []Render{{Name: "development", Objects: []string{"Deployment/polyaxon-gateway"}}}
	res, err := Evaluate(rep, dev, nil)
	require.NoError(t, err)
	assert.True(t, res.Passed())
	rr := res.Renders[0]
	assert.Equal(t, map[string]int{"MEDIUM": 1, "LOW": 2}, rr.Found)
	assert.Equal(t, Counts{Successes: 40, Failures: 3}, rr.Checks)

	// The same report with a CRITICAL finding fails: CRITICAL gates like HIGH.
	rep.Findings = append(rep.Findings, Finding{Render: "development", Object: "Pod/x", CheckID: "KSV-0017", Severity: "CRITICAL"})
	res, err = Evaluate(rep, dev, nil)
	require.NoError(t, err)
	assert.False(t, res.Passed())
}

func TestPassingChecksAreNotFindings(t *testing.T) {
	// With --include-non-failures trivy also lists passed checks: they are not findings.
	res, err := Evaluate(fixture(t), renders, nil)
	require.NoError(t, err)
	ssl := res.Renders[1]
	assert.Equal(t, map[string]int{"HIGH": 1, "MEDIUM": 1}, ssl.Found)
}

func TestObjectWithoutChecksIsAnError(t *testing.T) {
	// trivy did not recognise a written object (no result for it): an error, never a clean pass.
	withWorker := []Render{renders[0], renders[1]}
	withWorker[0].Objects = append(append([]string{}, renders[0].Objects...), "Deployment/polyaxon-worker")
	_, err := Evaluate(fixture(t), withWorker, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "render production: trivy ran no check on 1 of its 4 objects (Deployment/polyaxon-worker)")

	_, err = Evaluate(fixture(t), []Render{{Name: "development", Objects: []string{"Role/polyaxon-agent"}}}, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "render development: trivy ran no check on 1 of its 1 objects (Role/polyaxon-agent)")
}

func TestReportOutsideTheLayoutIsAnError(t *testing.T) {
	_, err := ParseReport([]byte(`{"Results": [{"Target": "all.yaml", "Misconfigurations": [{"ID": "KSV-0014", "Severity": "HIGH"}]}]}`))
	require.Error(t, err)
	assert.Contains(t, err.Error(), `"all.yaml": want <render>/<Kind>.<name>.yaml`)
}

func TestObjectFileRoundTrip(t *testing.T) {
	// A CRD's name has dots; a Kind never does.
	for _, c := range [][2]string{{"Role", "polyaxon-agent"}, {"CustomResourceDefinition", "operations.core.polyaxon.com"}} {
		obj, ok := objectOfFile(ObjectFile(c[0], c[1]))
		require.True(t, ok)
		assert.Equal(t, c[0]+"/"+c[1], obj)
	}
}

func TestParseIgnore(t *testing.T) {
	ig, err := ParseIgnore([]byte("# comment\n\nKSV-0056\tRole/polyaxon-agent   creates Services:  for notebooks\n"))
	require.NoError(t, err)
	assert.Equal(t, []Ignore{{CheckID: "KSV-0056", Object: "Role/polyaxon-agent", Reason: "creates Services:  for notebooks", Line: 3}}, ig)

	for text, want := range map[string]string{
		"KSV-0056 Role/polyaxon-agent\n":                    "1: \"KSV-0056 Role/polyaxon-agent\": want `CHECK-ID Kind/name reason` (the reason is required",
		"\nKSV-0056 polyaxon-agent because\n":               "2: object \"polyaxon-agent\": want Kind/name",
		"KSV-0056 Role/ because\n":                          "1: object \"Role/\": want Kind/name",
		"KSV-0056 Role/a one\n\nKSV-0056 Role/a two\n":      "3: KSV-0056 Role/a is already ignored on line 1",
		"KSV-0056 Role/a one\nKSV-0056 ClusterRole/a two\n": "",
	} {
		_, err := ParseIgnore([]byte(text))
		if want == "" {
			assert.NoError(t, err, text)
			continue
		}
		if assert.Error(t, err, text) {
			assert.Contains(t, err.Error(), want)
		}
	}
}

func TestWriteTable(t *testing.T) {
	res, err := Evaluate(fixture(t), renders, ignoresOf(t, `
KSV-0056  Role/polyaxon-agent  the runner creates Services for notebooks and tensorboards
KSV-0053  Role/polyaxon-agent  stale
`))
	require.NoError(t, err)
	var out bytes.Buffer
	require.NoError(t, res.WriteTable(&out, "scan-ignore.txt"))
	want := `RENDER production: 3 objects, 5 findings, 2 fail the gate
SEVERITY  FOUND  IGNORED  FAILING
CRITICAL  0      0        0
HIGH      3      1        2
MEDIUM    1      0        -
LOW       1      0        -

FAILING  CHECK     OBJECT                       N  TITLE
HIGH     KSV-0014  Deployment/polyaxon-gateway  2  Root file system is not read-only

IGNORED  CHECK     OBJECT               N  REASON
HIGH     KSV-0056  Role/polyaxon-agent  1  the runner creates Services for notebooks and tensorboards

RENDER production+ssl-ingress: 2 objects, 2 findings, 0 fail the gate
SEVERITY  FOUND  IGNORED  FAILING
CRITICAL  0      0        0
HIGH      1      1        0
MEDIUM    1      0        -
LOW       0      0        -

IGNORED  CHECK     OBJECT               N  REASON
HIGH     KSV-0056  Role/polyaxon-agent  1  the runner creates Services for notebooks and tensorboards

STALE: entries of scan-ignore.txt that matched nothing (remove them)
LINE  CHECK     OBJECT               REASON
3     KSV-0053  Role/polyaxon-agent  stale

SUMMARY: FAIL: 2 renders, 2 findings fail the gate (HIGH or CRITICAL, not in scan-ignore.txt), 1 stale ignore entries
`
	assert.Equal(t, want, out.String())
}
