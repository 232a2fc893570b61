// Package values layers the user's values over a profile, last wins:
//
//	chart defaults < profile < each -f FILE in order < --set < --set-string < --set-file
//
// Chart defaults are applied by Helm when rendering; Build returns everything above them.
// Every layer goes through Migrate first, so values written in Polyaxon's older shapes are
// rewritten (with a warning showing the new spelling) or rejected with the fix.
package values

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"

	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/strvals"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/redact"
)

// File is one values document and the name messages give it: the path the user wrote ("-" for
// stdin); for --set-file, the key. Stored inputs replay as Files, so their messages name the
// user's file, not wherever the contents are kept.
type File struct {
	Name    string `json:"name"`
	Content string `json:"content"`
}

// Layers are what Build merges, last wins:
//
//	Profile < each of Files in order < Set < SetString < SetFiles
type Layers struct {
	// ProfileName names the profile layer in messages ("profile NAME").
	ProfileName string
	Profile     map[string]any
	Files       []File   // -f/--values
	Set         []string // --set
	SetString   []string // --set-string
	SetFiles    []File   // --set-file key=path: Name is the key, Content the file's contents
}

// Build returns the layers merged, each migrated first, plus the migration warnings.
func Build(l Layers) (map[string]any, []Warning, error) {
	var warnings []Warning
	base, w, err := Migrate("profile "+l.ProfileName, DeepCopy(l.Profile))
	if err != nil {
		return nil, nil, err
	}
	warnings = append(warnings, w...)

	for _, f := range l.Files {
		layer, err := parseFile(f)
		if err != nil {
			return nil, nil, err
		}
		layer, w, err := Migrate(f.Name, layer)
		if err != nil {
			return nil, nil, err
		}
		warnings = append(warnings, w...)
		base = Merge(base, layer)
	}

	// --set family: parsed into one layer with Helm's strvals (same syntax and types as helm),
	// then migrated and merged like a file. Unlike helm, an index (a[0]=x) addresses the list
	// given on the command line, not a list from a file: lists are always replaced whole.
	sets := map[string]any{}
	for _, s := range l.Set {
		if err := strvals.ParseInto(s, sets); err != nil {
			return nil, nil, setError("--set", s, err)
		}
	}
	for _, s := range l.SetString {
		if err := strvals.ParseIntoString(s, sets); err != nil {
			return nil, nil, setError("--set-string", s, err)
		}
	}
	for _, f := range l.SetFiles {
		content := func([]rune) (any, error) { return f.Content, nil }
		if err := strvals.ParseIntoFile(f.Name+"=-", sets, content); err != nil {
			return nil, nil, setError("--set-file", f.Name+"=(file)", err)
		}
	}
	// No --set keys migrate to nothing and merge as a copy of base.
	sets, w, err = Migrate("--set", sets)
	if err != nil {
		return nil, nil, err
	}
	warnings = append(warnings, w...)
	return Merge(base, sets), warnings, nil
}

func parseFile(f File) (map[string]any, error) {
	vals, err := chartutil.ReadValues([]byte(f.Content))
	if err != nil {
		return nil, fmt.Errorf("values file %s: not valid YAML: %w", f.Name, err)
	}
	if isProfile(vals) {
		return nil, fmt.Errorf("values file %s: this is a profile (name, description, values, policy): use --profile %s; "+
			"for the chart alone (helm -f), each built-in profile's values are in values/<profile>.yaml", f.Name, f.Name)
	}
	return vals, nil
}

// isProfile reports a profile file given as a values file: its top level is a profile's (a
// values map, and nothing a profile does not have). No chart value is named values or policy.
func isProfile(vals map[string]any) bool {
	if _, ok := vals["values"].(map[string]any); !ok {
		return false
	}
	for k := range vals {
		switch k {
		case "name", "description", "values", "policy":
		default:
			return false
		}
	}
	return true
}

// Options are the user's value inputs as paths, in the order given on the command line.
type Options struct {
	ValueFiles   []string `json:"valueFiles,omitempty"`   // -f/--values
	Values       []string `json:"values,omitempty"`       // --set
	StringValues []string `json:"stringValues,omitempty"` // --set-string
	FileValues   []string `json:"fileValues,omitempty"`   // --set-file key=path
}

// Empty reports whether no user input was given.
func (o Options) Empty() bool {
	return len(o.ValueFiles)+len(o.Values)+len(o.StringValues)+len(o.FileValues) == 0
}

// Layers reads the files o names (- is stdin) into layers over a profile's values. Errors name
// the path and the fix.
func (o Options) Layers(profileName string, profile map[string]any) (Layers, error) {
	l := Layers{ProfileName: profileName, Profile: profile, Set: o.Values, SetString: o.StringValues}
	for _, path := range o.ValueFiles {
		f, err := Read(path)
		if err != nil {
			return l, err
		}
		l.Files = append(l.Files, f)
	}
	pairs, err := SetFilePairs(o.FileValues)
	if err != nil {
		return l, err
	}
	l.SetFiles, err = ReadSetFiles(pairs)
	return l, err
}

// BuildFiles is Build over the files o names: the profile, then o's layers.
func BuildFiles(profileName string, profile map[string]any, o Options) (map[string]any, []Warning, error) {
	l, err := o.Layers(profileName, profile)
	if err != nil {
		return nil, nil, err
	}
	return Build(l)
}

// ParseFile parses one values document the way Helm does; errors name the file and the fix.
func ParseFile(f File) (map[string]any, error) { return parseFile(f) }

// ReadFile reads one values file (- is stdin) the way Helm does.
func ReadFile(path string) (map[string]any, error) {
	f, err := Read(path)
	if err != nil {
		return nil, err
	}
	return parseFile(f)
}

// Read reads one values file (- is stdin) as it is stored with a release: its name as given
// and its contents now. Errors name the path and the fix.
func Read(path string) (File, error) {
	data, err := readFile(path)
	if err != nil {
		return File{}, err
	}
	return File{Name: path, Content: string(data)}, nil
}

// ReadSetFiles reads the files of --set-file pairs (SetFilePairs), in order; an error names
// the pair.
func ReadSetFiles(pairs []SetFilePair) ([]File, error) {
	var out []File
	for _, p := range pairs {
		f, err := ReadSetFile(p.Key, p.Path)
		if err != nil {
			return out, fmt.Errorf("--set-file %s=%s: %w", p.Key, p.Path, err)
		}
		out = append(out, f)
	}
	return out, nil
}

// ReadSetFile reads the file of --set-file key=path: the File is named by the key.
func ReadSetFile(key, path string) (File, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return File{}, fmt.Errorf("file %s not found (fix: check the path; it is relative to the current directory)", path)
	}
	if err != nil {
		return File{}, err
	}
	return File{Name: key, Content: string(data)}, nil
}

// readFile reads a values file's bytes (- is stdin); errors name the path and the fix.
func readFile(path string) ([]byte, error) {
	var data []byte
	var err error
	if strings.TrimSpace(path) == "-" {
		data, err = readAllStdin()
	} else {
		data, err = os.ReadFile(path)
	}
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("values file %s: not found (fix: check the -f path; it is relative to the current directory)", path)
	}
	if err != nil {
		return nil, fmt.Errorf("values file %s: %w", path, err)
	}
	return data, nil
}

var readAllStdin = func() ([]byte, error) { return io.ReadAll(os.Stdin) }

// setError names the argument with its secret values masked (the error goes to stderr, the
// result and the debug log).
func setError(flag, arg string, err error) error {
	scrub := redact.NewScrubber()
	scrub.Add(SetSecrets([]string{arg})...)
	msg := scrub.String(err.Error())
	return fmt.Errorf("%s %q: %s (fix: use key=value with dots for nesting, e.g. %s gateway.replicas=2, %s 'allowedHosts={a.example.com,b.example.com}', %s 'tolerations.core[0].operator=Exists'; quote the argument in your shell)",
		flag, RedactSetArg(arg), msg, flag, flag, flag)
}

// Merge deep-merges src into a copy of dst: maps merge key by key, anything else (lists
// included) is replaced by src. A nil in src is kept so Helm deletes the key on render.
func Merge(dst, src map[string]any) map[string]any {
	out := make(map[string]any, len(dst)+len(src))
	for k, v := range dst {
		out[k] = v
	}
	for k, v := range src {
		if sm, ok := v.(map[string]any); ok {
			if dm, ok := out[k].(map[string]any); ok {
				out[k] = Merge(dm, sm)
				continue
			}
		}
		out[k] = v
	}
	return out
}

// DeepCopy copies maps and lists recursively (scalars are immutable).
func DeepCopy(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = deepCopyValue(v)
	}
	return out
}

func deepCopyValue(v any) any {
	switch t := v.(type) {
	case map[string]any:
		return DeepCopy(t)
	case []any:
		l := make([]any, len(t))
		for i, x := range t {
			l[i] = deepCopyValue(x)
		}
		return l
	default:
		return v
	}
}

// Lookup returns the value at a dotted path (a.b.c) and whether it exists.
func Lookup(m map[string]any, path string) (any, bool) {
	var cur any = m
	for _, k := range strings.Split(path, ".") {
		mm, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		cur, ok = mm[k]
		if !ok {
			return nil, false
		}
	}
	return cur, true
}
