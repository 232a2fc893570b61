package scan

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strings"
)

// Ignore is one accepted finding: a check on one object, with the reason it is inherent.
type Ignore struct {
	CheckID string // e.g. KSV-0056
	Object  string // Kind/name, e.g. Role/polyaxon-agent
	Reason  string
	Line    int // line in the ignore file, for messages
}

// key is what a finding must equal to be covered by this entry.
func (i Ignore) key() findingKey { return findingKey{CheckID: i.CheckID, Object: i.Object} }

// ReadIgnoreFile parses an ignore file (see ParseIgnore).
func ReadIgnoreFile(path string) ([]Ignore, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading ignore file: %w", err)
	}
	ignores, err := ParseIgnore(data)
	if err != nil {
		return nil, fmt.Errorf("%s:%w", path, err)
	}
	return ignores, nil
}

// ParseIgnore reads one entry per line: `CHECK-ID  Kind/name  reason`, fields separated by
// whitespace, the reason being the rest of the line (required). Blank lines and lines starting
// with # are skipped. An entry given twice is an error: a second reason would be silently lost.
func ParseIgnore(data []byte) ([]Ignore, error) {
	var out []Ignore
	seen := map[findingKey]int{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) < 3 {
			return nil, fmt.Errorf("%d: %q: want `CHECK-ID Kind/name reason` (the reason is required: say why the finding is inherent)", n, line)
		}
		kind, name, ok := strings.Cut(fields[1], "/")
		if !ok || kind == "" || name == "" {
			return nil, fmt.Errorf("%d: object %q: want Kind/name, e.g. Role/polyaxon-agent", n, fields[1])
		}
		// The reason keeps its own spacing: everything after the second field.
		rest := strings.TrimSpace(line[len(fields[0]):])
		reason := strings.TrimSpace(rest[len(fields[1]):])
		ig := Ignore{CheckID: fields[0], Object: fields[1], Reason: reason, Line: n}
		if first, dup := seen[ig.key()]; dup {
			return nil, fmt.Errorf("%d: %s %s is already ignored on line %d", n, ig.CheckID, ig.Object, first)
		}
		seen[ig.key()] = n
		out = append(out, ig)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("0: %w", err)
	}
	return out, nil
}
