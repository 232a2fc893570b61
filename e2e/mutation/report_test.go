package mutation

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const src = `package x

func f(a, b int) bool {
	if a > b {
		return a+b > 0
	}
	return false
}
`

const report = `{"go_module":"m","files":[{"file_name":"x.go","mutations":[
 {"type":"CONDITIONALS_BOUNDARY","status":"LIVED","line":4,"column":7},
 {"type":"CONDITIONALS_NEGATION","status":"KILLED","line":4,"column":7},
 {"type":"ARITHMETIC_BASE","status":"LIVED","line":5,"column":11},
 {"type":"CONDITIONALS_BOUNDARY","status":"TIMED OUT","line":5,"column":14},
 {"type":"CONDITIONALS_NEGATION","status":"NOT COVERED","line":7,"column":1}]}]}`

func readFixture(t *testing.T) Package {
	t.Helper()
	root := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(root, "pkg", "x"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, "pkg", "x", "x.go"), []byte(src), 0o644))
	p, err := ReadReport(strings.NewReader(report), root, "pkg/x")
	require.NoError(t, err)
	return p
}

func TestReadReportCountsAndEfficacy(t *testing.T) {
	p := readFixture(t)
	require.Len(t, p.Mutants, 5)
	assert.Equal(t, Mutant{File: "pkg/x/x.go", Line: 4, Column: 7, Type: "CONDITIONALS_BOUNDARY", Status: Lived, Code: "if a > b {"}, p.Mutants[0])
	assert.Equal(t, 1, p.Count(Killed))
	assert.Equal(t, 2, p.Count(Lived))
	assert.Equal(t, 1, p.Count(TimedOut))
	assert.InDelta(t, 100.0/3, p.Efficacy(), 0.001, "killed / (killed + lived); timeouts count neither way")
	assert.Equal(t, 100.0, Package{}.Efficacy())
}

func TestSurvivorsAcceptByCodeAndTheGateFails(t *testing.T) {
	p := readFixture(t)
	sv, err := ReadSurvivors(strings.NewReader("# comment\n\npkg/x/x.go CONDITIONALS_BOUNDARY `a > b` the boundary a == b is unreachable here\n"+
		"pkg/x/x.go ARITHMETIC_BASE `nowhere` gone\n"+"pkg/x/x.go CONDITIONALS_NEGATION `a+b` another mutator on the line\n"+"other/y.go ARITHMETIC_BASE `x` another package\n"), "survivors.txt")
	require.NoError(t, err)
	require.Len(t, sv, 4)
	assert.Equal(t, "the boundary a == b is unreachable here", sv[0].Reason)

	gate := Gate{"pkg/x": 80}
	s := Summarize([]Package{p}, sv, gate)
	assert.False(t, s.OK(), "33%% is under 80%%")
	assert.Equal(t, []string{"pkg/x"}, s.Below)
	require.Len(t, s.Unexplained, 1)
	assert.Equal(t, "ARITHMETIC_BASE", s.Unexplained[0].Type)
	assert.Len(t, s.Accepted, 1)
	require.Len(t, s.Stale, 2, "entries of a package that ran but match no survivor (the mutator counts); other packages' entries are not judged")
	assert.Equal(t, "nowhere", s.Stale[0].Code)
	assert.Equal(t, "a+b", s.Stale[1].Code)

	var out bytes.Buffer
	require.NoError(t, s.Write(&out, gate))
	assert.Regexp(t, `pkg/x +1 +2 +1 +1 +0 +33\.33% +>= 80%: FAILED`, out.String())
	assert.Contains(t, out.String(), "pkg/x/x.go:5:11 ARITHMETIC_BASE  return a+b > 0")
	assert.Contains(t, out.String(), "pkg/x/x.go:4:7 CONDITIONALS_BOUNDARY: the boundary a == b is unreachable here")
	assert.Contains(t, out.String(), "stale survivors entry (line 4)")

	assert.True(t, Summarize([]Package{p}, sv, Gate{"pkg/x": 30}).OK())
}

func TestReadSurvivorsNeedsCodeAndReason(t *testing.T) {
	for _, line := range []string{
		"pkg/x/x.go CONDITIONALS_BOUNDARY a > b no backticks",
		"pkg/x/x.go CONDITIONALS_BOUNDARY `a > b`",
		"pkg/x/x.go CONDITIONALS_BOUNDARY `a > b no end",
		"pkg/x/x.go",
	} {
		_, err := ReadSurvivors(strings.NewReader(line+"\n"), "s.txt")
		assert.Error(t, err, line)
		if err != nil {
			assert.Contains(t, err.Error(), "s.txt:1:")
		}
	}
}
