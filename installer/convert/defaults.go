package convert

import (
	"embed"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/Masterminds/semver/v3"
	"helm.sh/helm/v3/pkg/chartutil"
)

// official/<version>.yaml: the official chart's defaults, as `helm get values --all` prints
// them for a release given no values (its header says where they come from).
//
//go:embed official/*.yaml
var officialFS embed.FS

// OfficialVersions are the official chart versions whose defaults are known, oldest first.
func OfficialVersions() []string {
	entries, _ := officialFS.ReadDir("official")
	var vs []*semver.Version
	for _, e := range entries {
		if v, err := semver.NewVersion(strings.TrimSuffix(e.Name(), ".yaml")); err == nil {
			vs = append(vs, v)
		}
	}
	slices.SortFunc(vs, func(a, b *semver.Version) int { return a.Compare(b) })
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = v.Original()
	}
	return out
}

// LatestOfficialVersion is the newest official chart version whose defaults are known.
func LatestOfficialVersion() string {
	vs := OfficialVersions()
	return vs[len(vs)-1]
}

// OfficialDefaults are the official chart's defaults at chart version (e.g. 2.15.1).
func OfficialDefaults(version string) (map[string]any, error) {
	b, err := officialFS.ReadFile("official/" + strings.TrimPrefix(version, "v") + ".yaml")
	if err != nil {
		return nil, fmt.Errorf("the defaults of the official chart %s are not known to this polyaxon-deploy (known: %s): name the version the values were written for, or keep every value with --keep-defaults",
			version, strings.Join(OfficialVersions(), ", "))
	}
	return chartutil.ReadValues(b)
}

// WithDefaults leaves out of the conversion every value of the input equal to the official
// chart's default at the same path (defaults as OfficialDefaults returns them, or a release's
// chart's own): `helm get values --all` prints them all, and they are not the user's choices;
// ours' own defaults (or the profile's) then apply. version names the chart in messages.
func WithDefaults(version string, defaults map[string]any) Option {
	return func(c *converter) { c.defaultsOf, c.defaults = version, defaults }
}

// Option changes how Convert works.
type Option func(*converter)

// leaveOutDefaults returns in without the values equal to defaults (a map is compared key by
// key and left out when nothing of it is left) and the paths of the values left out.
func leaveOutDefaults(in, defaults map[string]any, prefix string) (map[string]any, []string) {
	out := map[string]any{}
	var left []string
	for _, k := range slices.Sorted(maps.Keys(in)) {
		v, path := in[k], prefix+k
		d, known := defaults[k]
		if !known {
			out[k] = v
			continue
		}
		vm, vIsMap := v.(map[string]any)
		dm, dIsMap := d.(map[string]any)
		if vIsMap && dIsMap && len(vm) > 0 {
			rest, gone := leaveOutDefaults(vm, dm, path+".")
			left = append(left, gone...)
			if len(rest) > 0 {
				out[k] = rest
			}
			continue
		}
		if sameValue(v, d) {
			left = append(left, path)
			continue
		}
		out[k] = v
	}
	return out, left
}
