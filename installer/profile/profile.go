// Package profile loads installer profiles: a values overlay plus the installer policy
// (which checks are fatal, backups before upgrades, timeouts, Pod Security level, replicas).
package profile

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
	"time"

	"helm.sh/helm/v3/pkg/chartutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/polyaxon-deploy/polyaxon-deploy/profiles"
)

// Default is the profile used when --profile is not given (install and render).
const Default = "production"

// Profile is one profile file.
type Profile struct {
	Name        string
	Description string
	// Source is "embedded" or the path of a profile file on disk.
	Source string
	// Values is the overlay between chart defaults and the user's -f files.
	Values map[string]any
	Policy Policy
}

// Policy is the installer behaviour a profile selects. Decoded strictly: a typo is an error.
type Policy struct {
	// PodSecurityLevel is enforced on the release namespace (privileged, baseline, restricted).
	PodSecurityLevel string `json:"podSecurityLevel,omitempty"`
	// BackupRequired: no upgrade without a verified backup.
	BackupRequired bool `json:"backupRequired,omitempty"`
	// FatalChecks are check IDs whose failure stops the remaining checks.
	FatalChecks []string `json:"fatalChecks,omitempty"`
	// IgnoreChecks are check IDs always demoted to warnings (as if --ignore was given).
	IgnoreChecks []string `json:"ignoreChecks,omitempty"`
	// OwnRunsNamespace: runs must live in a namespace of their own (runs.namespace), never the
	// release's.
	OwnRunsNamespace bool `json:"ownRunsNamespace,omitempty"`
	// MinGatewayReplicas is the least gateway.replicas accepted.
	MinGatewayReplicas int `json:"minGatewayReplicas,omitempty"`
	// MinPostgresInstances: with postgresql.mode=cloudnativepg, fewer instances is a warning
	// (a database that one node's loss stops).
	MinPostgresInstances int `json:"minPostgresInstances,omitempty"`
	// Timeout bounds install/upgrade waits.
	Timeout metav1.Duration `json:"timeout,omitempty"`
}

// DefaultTimeout applies when a profile sets none.
const DefaultTimeout = 10 * time.Minute

// TimeoutOrDefault returns Timeout, or DefaultTimeout when unset.
func (p Policy) TimeoutOrDefault() time.Duration {
	if p.Timeout.Duration <= 0 {
		return DefaultTimeout
	}
	return p.Timeout.Duration
}

// IsFatal reports whether check id is fatal under this policy.
func (p Policy) IsFatal(id string) bool { return contains(p.FatalChecks, id) }

// IsIgnored reports whether check id is demoted to a warning by this policy.
func (p Policy) IsIgnored(id string) bool { return contains(p.IgnoreChecks, id) }

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

var podSecurityLevels = []string{"privileged", "baseline", "restricted"}

// file is the on-disk shape; values stays loose (the chart schema validates it).
type file struct {
	Name        string         `json:"name,omitempty"`
	Description string         `json:"description,omitempty"`
	Values      map[string]any `json:"values,omitempty"`
	Policy      Policy         `json:"policy,omitempty"`
}

// rawFile decodes the top level strictly and leaves policy for its own strict pass, so errors
// name the section.
type rawFile struct {
	Name        string          `json:"name,omitempty"`
	Description string          `json:"description,omitempty"`
	Values      map[string]any  `json:"values,omitempty"`
	Policy      json.RawMessage `json:"policy,omitempty"`
}

// Names lists the embedded profiles, sorted.
func Names() []string { return NamesFS(profiles.FS) }

// NamesFS lists the profiles (*.yaml at the root) of fsys.
func NamesFS(fsys fs.FS) []string {
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil
	}
	var names []string
	for _, e := range entries {
		if !e.IsDir() && strings.HasSuffix(e.Name(), ".yaml") {
			names = append(names, strings.TrimSuffix(e.Name(), ".yaml"))
		}
	}
	sort.Strings(names)
	return names
}

// Load returns an embedded profile by name, or reads a profile file when nameOrPath looks like
// a path (contains a slash or ends in .yaml/.yml). "" means Default.
func Load(nameOrPath string) (*Profile, error) {
	if IsPath(nameOrPath) {
		data, err := ReadFile(nameOrPath)
		if err != nil {
			return nil, err
		}
		return ParseFile(nameOrPath, data)
	}
	return LoadFS(profiles.FS, nameOrPath)
}

// ParseFile decodes the contents of a profile file (read now, or stored with a release): the
// profile is named after the file, and its Source is the file's path.
func ParseFile(file string, data []byte) (*Profile, error) {
	p, err := Parse(strings.TrimSuffix(strings.TrimSuffix(path.Base(file), ".yaml"), ".yml"), data)
	if err != nil {
		return nil, err
	}
	p.Source = file
	return p, nil
}

// LoadFS returns the profile name from fsys (name.yaml at its root).
func LoadFS(fsys fs.FS, name string) (*Profile, error) {
	if name == "" {
		name = Default
	}
	data, err := fs.ReadFile(fsys, name+".yaml")
	if err != nil || !fs.ValidPath(name) {
		return nil, fmt.Errorf("unknown profile %q: known profiles are %s (or pass a profile file path)",
			name, strings.Join(NamesFS(fsys), ", "))
	}
	p, err := Parse(name, data)
	if err != nil {
		return nil, err
	}
	p.Source = "embedded"
	return p, nil
}

// Parse decodes a profile file. The top level and policy are strict; values are validated
// later against the chart schema.
func Parse(name string, data []byte) (*Profile, error) {
	var raw rawFile
	if err := yaml.UnmarshalStrict(data, &raw); err != nil {
		return nil, fmt.Errorf("profile %s: %w (allowed keys: name, description, values, policy)", name, err)
	}
	f := file{Name: raw.Name, Description: raw.Description, Values: raw.Values}
	if len(raw.Policy) > 0 && string(raw.Policy) != "null" {
		dec := json.NewDecoder(bytes.NewReader(raw.Policy))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&f.Policy); err != nil {
			return nil, fmt.Errorf("profile %s: policy: %w (allowed keys: podSecurityLevel, backupRequired, fatalChecks, ignoreChecks, minGatewayReplicas, minPostgresInstances, ownRunsNamespace, timeout)", name, err)
		}
	}
	if f.Name != "" && f.Name != name {
		return nil, fmt.Errorf("profile %s: file declares name %q; rename the file or the name", name, f.Name)
	}
	// Decode values the way Helm does, so numbers and nulls behave exactly as in a -f file.
	vals := map[string]any{}
	if f.Values != nil {
		raw, err := yaml.Marshal(map[string]any{"values": f.Values})
		if err != nil {
			return nil, fmt.Errorf("profile %s: values: %w", name, err)
		}
		v, err := chartutil.ReadValues(raw)
		if err != nil {
			return nil, fmt.Errorf("profile %s: values: %w", name, err)
		}
		if m, ok := v["values"].(map[string]any); ok {
			vals = m
		}
	}
	if err := f.Policy.validate(); err != nil {
		return nil, fmt.Errorf("profile %s: %w", name, err)
	}
	return &Profile{Name: name, Description: f.Description, Values: vals, Policy: f.Policy}, nil
}

func (p Policy) validate() error {
	var errs []error
	if p.PodSecurityLevel != "" && !contains(podSecurityLevels, p.PodSecurityLevel) {
		errs = append(errs, fmt.Errorf("policy.podSecurityLevel: %q is not one of %s", p.PodSecurityLevel, strings.Join(podSecurityLevels, ", ")))
	}
	if p.MinGatewayReplicas < 0 {
		errs = append(errs, fmt.Errorf("policy.minGatewayReplicas: must be >= 0, got %d", p.MinGatewayReplicas))
	}
	if p.MinPostgresInstances < 0 {
		errs = append(errs, fmt.Errorf("policy.minPostgresInstances: must be >= 0, got %d", p.MinPostgresInstances))
	}
	if p.Timeout.Duration < 0 {
		errs = append(errs, fmt.Errorf("policy.timeout: must be positive, got %s", p.Timeout.Duration))
	}
	return errors.Join(errs...)
}

// ReadFile reads a profile file's bytes; errors name the path and the fix.
func ReadFile(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("profile file %s: %w (fix: check the path, or use one of the built-in profiles: %s)",
			path, unwrapPathErr(err), strings.Join(Names(), ", "))
	}
	return data, nil
}

// IsPath tells a profile file (a path, or a name ending in .yaml) from a built-in profile's name.
func IsPath(s string) bool {
	return strings.ContainsRune(s, '/') || strings.HasSuffix(s, ".yaml") || strings.HasSuffix(s, ".yml")
}

func unwrapPathErr(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// Marshal renders a profile back to YAML (used by tests and `render --values-only`).
func (p *Profile) Marshal() ([]byte, error) {
	var buf bytes.Buffer
	out, err := yaml.Marshal(file{Name: p.Name, Description: p.Description, Values: p.Values, Policy: p.Policy})
	if err != nil {
		return nil, err
	}
	buf.Write(out)
	return buf.Bytes(), nil
}
