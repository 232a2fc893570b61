// Package mutation reads the reports of the gremlins mutation tester (`make mutate`), matches
// the mutants that survived against the list of survivors judged acceptable, and prints the
// efficacy of each package.
package mutation

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
)

// Statuses gremlins gives a mutant.
const (
	Killed     = "KILLED"
	Lived      = "LIVED"
	TimedOut   = "TIMED OUT"
	NotCovered = "NOT COVERED"
	NotViable  = "NOT VIABLE"
)

// Mutant is one mutation gremlins applied (or could not) and what the tests did with it.
type Mutant struct {
	File   string // repository-relative path
	Line   int
	Column int
	Type   string
	Status string
	// Code is the mutated line of source, trimmed.
	Code string
}

func (m Mutant) String() string {
	return fmt.Sprintf("%s:%d:%d %s", m.File, m.Line, m.Column, m.Type)
}

// Package is one package's run.
type Package struct {
	Path    string // e.g. installer/plan
	Mutants []Mutant
}

// Count is how many of the package's mutants have status.
func (p Package) Count(status string) int {
	n := 0
	for _, m := range p.Mutants {
		if m.Status == status {
			n++
		}
	}
	return n
}

// Efficacy is killed / (killed + lived) in percent, gremlins' own definition: timed-out and
// not viable mutants count neither way. A package without any tested mutant has 100.
func (p Package) Efficacy() float64 {
	k, l := p.Count(Killed), p.Count(Lived)
	if k+l == 0 {
		return 100
	}
	return 100 * float64(k) / float64(k+l)
}

type gremlinsReport struct {
	Files []struct {
		FileName  string `json:"file_name"`
		Mutations []struct {
			Type   string `json:"type"`
			Status string `json:"status"`
			Line   int    `json:"line"`
			Column int    `json:"column"`
		} `json:"mutations"`
	} `json:"files"`
}

// ReadReport reads gremlins' -o JSON for the package at pkgPath (relative to root), with each
// mutant's line of source from root.
func ReadReport(r io.Reader, root, pkgPath string) (Package, error) {
	var rep gremlinsReport
	if err := json.NewDecoder(r).Decode(&rep); err != nil {
		return Package{}, fmt.Errorf("gremlins report of %s: %w", pkgPath, err)
	}
	p := Package{Path: pkgPath}
	for _, f := range rep.Files {
		// gremlins names files relative to the directory it was run on.
		rel := filepath.ToSlash(filepath.Join(pkgPath, f.FileName))
		lines, err := readLines(filepath.Join(root, rel))
		if err != nil {
			return Package{}, err
		}
		for _, m := range f.Mutations {
			code := ""
			if m.Line >= 1 && m.Line <= len(lines) {
				code = strings.TrimSpace(lines[m.Line-1])
			}
			p.Mutants = append(p.Mutants, Mutant{File: rel, Line: m.Line, Column: m.Column, Type: m.Type, Status: m.Status, Code: code})
		}
	}
	sort.Slice(p.Mutants, func(i, j int) bool {
		a, b := p.Mutants[i], p.Mutants[j]
		if a.File != b.File {
			return a.File < b.File
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Column < b.Column
	})
	return p, nil
}

func readLines(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return strings.Split(string(b), "\n"), nil
}

// Survivor is an accepted surviving mutant: a line of the survivors file,
//
//	path TYPE `code` reason
//
// where code is a part of the mutated line (so the entry survives edits that move the line)
// and the reason says why no test should kill it.
type Survivor struct {
	File, Type, Code, Reason string
	Line                     int // in the survivors file
}

// Matches reports whether the entry accepts m.
func (s Survivor) Matches(m Mutant) bool {
	return s.File == m.File && s.Type == m.Type && strings.Contains(m.Code, s.Code)
}

// ReadSurvivors parses a survivors file: blank lines and lines starting with # are ignored;
// every entry needs a reason.
func ReadSurvivors(r io.Reader, name string) ([]Survivor, error) {
	var out []Survivor
	sc := bufio.NewScanner(r)
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		bad := func(why string) error {
			return fmt.Errorf("%s:%d: %s; want: path TYPE `code` reason", name, n, why)
		}
		fields := strings.Fields(line)
		if len(fields) < 3 {
			return nil, bad("too few fields")
		}
		rest := strings.TrimSpace(strings.TrimPrefix(strings.TrimPrefix(line, fields[0]), " "))
		rest = strings.TrimSpace(strings.TrimPrefix(rest, fields[1]))
		if !strings.HasPrefix(rest, "`") {
			return nil, bad("the code must be quoted in backticks")
		}
		end := strings.Index(rest[1:], "`")
		if end < 0 {
			return nil, bad("unterminated backtick")
		}
		code, reason := rest[1:1+end], strings.TrimSpace(rest[2+end:])
		if strings.TrimSpace(code) == "" {
			return nil, bad("empty code")
		}
		if reason == "" {
			return nil, bad("no reason")
		}
		out = append(out, Survivor{File: fields[0], Type: fields[1], Code: code, Reason: reason, Line: n})
	}
	return out, sc.Err()
}

// Gate is the efficacy a package must reach.
type Gate map[string]float64

// Summary is the outcome over all packages.
type Summary struct {
	Packages []Package
	// Accepted maps a surviving mutant to the entry that accepts it; Unexplained survived
	// without one.
	Accepted    map[Mutant]Survivor
	Unexplained []Mutant
	// Stale entries accept no surviving mutant of the packages that ran.
	Stale []Survivor
	// Below are the gated packages under their bar.
	Below []string
}

// Summarize matches survivors and applies the gate.
func Summarize(pkgs []Package, survivors []Survivor, gate Gate) Summary {
	s := Summary{Packages: pkgs, Accepted: map[Mutant]Survivor{}}
	used := make([]bool, len(survivors))
	ran := map[string]bool{}
	for _, p := range pkgs {
		ran[p.Path] = true
		for _, m := range p.Mutants {
			if m.Status != Lived {
				continue
			}
			found := false
			for i, sv := range survivors {
				if sv.Matches(m) {
					s.Accepted[m], used[i], found = sv, true, true
					break
				}
			}
			if !found {
				s.Unexplained = append(s.Unexplained, m)
			}
		}
		if bar, ok := gate[p.Path]; ok && p.Efficacy() < bar {
			s.Below = append(s.Below, p.Path)
		}
	}
	for i, sv := range survivors {
		if !used[i] && ran[filepath.ToSlash(filepath.Dir(sv.File))] {
			s.Stale = append(s.Stale, sv)
		}
	}
	return s
}

// OK: every gated package reached its bar.
func (s Summary) OK() bool { return len(s.Below) == 0 }

// Write prints the per-package table, then the survivors (accepted with their reason, and
// those without one), then stale entries.
func (s Summary) Write(w io.Writer, gate Gate) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PACKAGE\tKILLED\tLIVED\tTIMED OUT\tNOT COVERED\tNOT VIABLE\tEFFICACY\tGATE")
	for _, p := range s.Packages {
		g := "-"
		if bar, ok := gate[p.Path]; ok {
			g = fmt.Sprintf(">= %.0f%%: ok", bar)
			if p.Efficacy() < bar {
				g = fmt.Sprintf(">= %.0f%%: FAILED", bar)
			}
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%.2f%%\t%s\n", p.Path, p.Count(Killed), p.Count(Lived), p.Count(TimedOut),
			p.Count(NotCovered), p.Count(NotViable), p.Efficacy(), g)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(s.Unexplained) > 0 {
		fmt.Fprintf(w, "\nSurvivors without a test or an entry in the survivors file (%d):\n", len(s.Unexplained))
		for _, m := range s.Unexplained {
			fmt.Fprintf(w, "  %s  %s\n", m, m.Code)
		}
	}
	if len(s.Accepted) > 0 {
		fmt.Fprintf(w, "\nAccepted survivors (%d):\n", len(s.Accepted))
		var ms []Mutant
		for m := range s.Accepted {
			ms = append(ms, m)
		}
		sort.Slice(ms, func(i, j int) bool { return ms[i].String() < ms[j].String() })
		for _, m := range ms {
			fmt.Fprintf(w, "  %s: %s\n", m, s.Accepted[m].Reason)
		}
	}
	for _, sv := range s.Stale {
		fmt.Fprintf(w, "\nstale survivors entry (line %d): %s %s `%s` accepts no surviving mutant: remove it\n", sv.Line, sv.File, sv.Type, sv.Code)
	}
	return nil
}
