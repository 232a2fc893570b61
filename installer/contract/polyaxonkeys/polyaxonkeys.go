// Package polyaxonkeys derives, from the Python sources of an installed Polyaxon, the POLYAXON_*
// environment keys each of its programs reads: cli (the `polyaxon` package: the agent, and the
// CLI inside the API and scheduler images) and haupt (the API and scheduler). It reads the
// installed files as text and runs no Python, so a new Polyaxon version re-derives the keys.
//
// The installation is the virtual environment e2e/scripts/install-polyaxon.sh makes (make deps).
package polyaxonkeys

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// The programs whose keys are derived.
const (
	CLI   = "cli"
	Haupt = "haupt"
)

// InstallHint says how to install Polyaxon's packages.
const InstallHint = "run make deps (e2e/scripts/install-polyaxon.sh)"

// KeysFile is cli's list of key constants, relative to site-packages.
const KeysFile = "polyaxon/_env_vars/keys.py"

// stampFile is written last by install-polyaxon.sh: without it the install is incomplete.
const stampFile = ".requirements-sha256"

// CacheDir is ${POLYAXON_DEPLOY_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/polyaxon-deploy}, as in
// e2e/scripts/install-polyaxon.sh.
func CacheDir() string {
	if d := os.Getenv("POLYAXON_DEPLOY_CACHE"); d != "" {
		return d
	}
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "polyaxon-deploy")
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return filepath.Join(os.TempDir(), "polyaxon-deploy")
	}
	return filepath.Join(home, ".cache", "polyaxon-deploy")
}

// VenvDir is where install-polyaxon.sh installs Polyaxon version.
func VenvDir(version string) string {
	return filepath.Join(CacheDir(), "polyaxon-"+version)
}

// SitePackages finds the site-packages directory of a complete install in venv.
func SitePackages(venv string) (string, error) {
	if _, err := os.Stat(filepath.Join(venv, stampFile)); err != nil {
		return "", fmt.Errorf("Polyaxon is not installed (or its install is incomplete) in %s: %w; %s", venv, err, InstallHint)
	}
	matches, err := filepath.Glob(filepath.Join(venv, "lib", "python3*", "site-packages", filepath.FromSlash(KeysFile)))
	if err != nil {
		return "", err
	}
	switch len(matches) {
	case 0:
		return "", fmt.Errorf("no lib/python3*/site-packages/%s in %s; %s", KeysFile, venv, InstallHint)
	case 1:
		return strings.TrimSuffix(matches[0], string(filepath.Separator)+filepath.FromSlash(KeysFile)), nil
	default:
		return "", fmt.Errorf("more than one Python in %s (%s): remove it and %s", venv, strings.Join(matches, ", "), InstallHint)
	}
}

// Keys maps a key to where it is read: a path relative to site-packages and a line.
type Keys map[string]string

// Sorted lists the keys.
func (k Keys) Sorted() []string {
	out := make([]string, 0, len(k))
	for key := range k {
		out = append(out, key)
	}
	sort.Strings(out)
	return out
}

// Derived is what one installation reads.
type Derived struct {
	SitePackages string
	// Constants are cli's ENV_KEYS_* names and their keys (KeysFile).
	Constants map[string]string
	// Readers are the keys of each program (CLI, Haupt).
	Readers map[string]Keys
}

// Reads reports whether program reads key.
func (d *Derived) Reads(program, key string) bool {
	_, ok := d.Readers[program][key]
	return ok
}

var (
	constantDef = regexp.MustCompile(`(?m)^(ENV_KEYS_[A-Z0-9_]+)[ \t]*=[ \t]*"(POLYAXON_[A-Z0-9_]+)"`)
	// A key given to a model field that is filled from the environment.
	aliasRef = regexp.MustCompile(`\balias\s*=\s*\(?\s*(ENV_KEYS_[A-Z0-9_]+|"POLYAXON_[A-Z0-9_]+")`)
	// os.environ.get(K), os.getenv(K), os.environ[K]; an assignment os.environ[K] = v is a write.
	envRead    = regexp.MustCompile(`\bos\.(?:environ\.get|getenv)\(\s*(ENV_KEYS_[A-Z0-9_]+|"POLYAXON_[A-Z0-9_]+")|\bos\.environ\[\s*(ENV_KEYS_[A-Z0-9_]+|"POLYAXON_[A-Z0-9_]+")\s*\]`)
	assignment = regexp.MustCompile(`^\s*=[^=]`)
	literal    = regexp.MustCompile(`"(POLYAXON_[A-Z0-9_]+)"`)
	// haupt's options (haupt/common/options/registry): a class whose store is the environment.
	moduleStr   = regexp.MustCompile(`(?m)^([A-Z][A-Z0-9_]*)[ \t]*=[ \t]*"(POLYAXON_[A-Z0-9_]+)"`)
	classStart  = regexp.MustCompile(`(?m)^class\s`)
	optionKey   = regexp.MustCompile(`(?m)^\s+key\s*=\s*([A-Z][A-Z0-9_]*|"POLYAXON_[A-Z0-9_]+")\s*$`)
	optionInEnv = regexp.MustCompile(`(?m)^\s+store\s*=\s*OptionStores\.ENV\s*$`)
)

// hauptLiteralDirs: where any "POLYAXON_..." string in haupt names a key it reads (settings and
// configuration schemas), relative to site-packages.
var hauptLiteralDirs = []string{"haupt/polyconf/", "haupt/common/settings/", "haupt/settings.py", "haupt/schemas/"}

// Derive reads the installed sources under sitePackages:
//
//   - cli: every ENV_KEYS_* constant of KeysFile, and every literal key the polyaxon package reads
//     (alias="POLYAXON_...", os.environ.get/os.getenv/os.environ[...] of a literal).
//   - haupt: every key the haupt package reads by a model alias or an environment read, named by
//     an ENV_KEYS_* constant or a literal; its options stored in the environment
//     (store = OptionStores.ENV); and every literal key under haupt/polyconf, haupt/common/settings,
//     haupt/settings.py and haupt/schemas.
//
// Files under a tests directory are skipped. An ENV_KEYS_* name that KeysFile does not define is
// an error: the derivation would otherwise miss a key.
func Derive(sitePackages string) (*Derived, error) {
	d := &Derived{SitePackages: sitePackages, Constants: map[string]string{}, Readers: map[string]Keys{CLI: {}, Haupt: {}}}
	src, err := os.ReadFile(filepath.Join(sitePackages, filepath.FromSlash(KeysFile)))
	if err != nil {
		return nil, fmt.Errorf("%w; %s", err, InstallHint)
	}
	for _, m := range constantDef.FindAllSubmatchIndex(src, -1) {
		name, key := string(src[m[2]:m[3]]), string(src[m[4]:m[5]])
		d.Constants[name] = key
		d.Readers[CLI].add(key, KeysFile, lineAt(src, m[0]))
	}
	if len(d.Constants) == 0 {
		return nil, fmt.Errorf("%s defines no ENV_KEYS_* constant: has the file moved?", filepath.Join(sitePackages, KeysFile))
	}
	var errs []error
	for _, program := range []struct {
		name, pkg string
		scan      func(rel string, src []byte) error
	}{
		{CLI, "polyaxon", d.scanCLI},
		{Haupt, "haupt", d.scanHaupt},
	} {
		root := filepath.Join(sitePackages, program.pkg)
		if _, err := os.Stat(root); err != nil {
			return nil, fmt.Errorf("package %s is not installed: %w; %s", program.pkg, err, InstallHint)
		}
		err := filepath.WalkDir(root, func(path string, e fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if e.IsDir() {
				if e.Name() == "tests" || e.Name() == "__pycache__" {
					return filepath.SkipDir
				}
				return nil
			}
			if !strings.HasSuffix(path, ".py") {
				return nil
			}
			rel, err := filepath.Rel(sitePackages, path)
			if err != nil {
				return err
			}
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			if err := program.scan(filepath.ToSlash(rel), src); err != nil {
				errs = append(errs, err)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		if len(d.Readers[program.name]) == 0 {
			return nil, fmt.Errorf("no key read by %s found under %s", program.name, root)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return d, nil
}

func (d *Derived) scanCLI(rel string, src []byte) error {
	keys := d.Readers[CLI]
	for _, m := range aliasRef.FindAllSubmatchIndex(src, -1) {
		if k, ok := unquote(src[m[2]:m[3]]); ok {
			keys.add(k, rel, lineAt(src, m[0]))
		}
	}
	for _, r := range envReads(src) {
		if k, ok := unquote([]byte(r.ref)); ok {
			keys.add(k, rel, r.line)
		}
	}
	return nil
}

func (d *Derived) scanHaupt(rel string, src []byte) error {
	keys := d.Readers[Haupt]
	var unknown []string
	add := func(ref string, line int) {
		if k, ok := unquote([]byte(ref)); ok {
			keys.add(k, rel, line)
		} else if k, ok := d.Constants[ref]; ok {
			keys.add(k, rel, line)
		} else {
			unknown = append(unknown, fmt.Sprintf("%s:%d: %s", rel, line, ref))
		}
	}
	for _, m := range aliasRef.FindAllSubmatchIndex(src, -1) {
		add(string(src[m[2]:m[3]]), lineAt(src, m[0]))
	}
	for _, r := range envReads(src) {
		add(r.ref, r.line)
	}
	for _, dir := range hauptLiteralDirs {
		if rel == dir || (strings.HasSuffix(dir, "/") && strings.HasPrefix(rel, dir)) {
			for _, m := range literal.FindAllSubmatchIndex(src, -1) {
				keys.add(string(src[m[2]:m[3]]), rel, lineAt(src, m[0]))
			}
		}
	}
	if optionInEnv.Match(src) {
		consts := map[string]string{}
		for _, m := range moduleStr.FindAllSubmatch(src, -1) {
			consts[string(m[1])] = string(m[2])
		}
		starts := classStart.FindAllIndex(src, -1)
		for i, s := range starts {
			end := len(src)
			if i+1 < len(starts) {
				end = starts[i+1][0]
			}
			class := src[s[0]:end]
			km := optionKey.FindSubmatch(class)
			if km == nil || !optionInEnv.Match(class) {
				continue
			}
			if k, ok := unquote(km[1]); ok {
				keys.add(k, rel, lineAt(src, s[0]))
			} else if k, ok := consts[string(km[1])]; ok {
				keys.add(k, rel, lineAt(src, s[0]))
			}
		}
	}
	if len(unknown) > 0 {
		return fmt.Errorf("haupt reads constants that %s does not define: %s", KeysFile, strings.Join(unknown, ", "))
	}
	return nil
}

type read struct {
	ref  string
	line int
}

// envReads finds the reads of the environment in src, by constant name or quoted literal.
func envReads(src []byte) []read {
	var out []read
	for _, m := range envRead.FindAllSubmatchIndex(src, -1) {
		switch {
		case m[2] >= 0:
			out = append(out, read{string(src[m[2]:m[3]]), lineAt(src, m[0])})
		case assignment.Match(src[m[1]:]):
			// os.environ[K] = v sets K for the process and its children.
		default:
			out = append(out, read{string(src[m[4]:m[5]]), lineAt(src, m[0])})
		}
	}
	return out
}

func unquote(ref []byte) (string, bool) {
	s := string(ref)
	if strings.HasPrefix(s, `"`) {
		return strings.Trim(s, `"`), true
	}
	return "", false
}

func lineAt(src []byte, offset int) int {
	return 1 + bytes.Count(src[:offset], []byte("\n"))
}

// add keeps the first place a key is found (files are walked in lexical order).
func (k Keys) add(key, rel string, line int) {
	if _, ok := k[key]; !ok {
		k[key] = fmt.Sprintf("%s:%d", rel, line)
	}
}
