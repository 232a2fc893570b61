package convert

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/values"
)

// allValues is what `helm get values --all` prints for a release of the official chart 2.15.1
// given mine: the chart's defaults (its subcharts' included) with mine over them.
func allValues(t *testing.T, mine map[string]any) map[string]any {
	t.Helper()
	d, err := OfficialDefaults("2.15.1")
	require.NoError(t, err)
	return values.Merge(d, mine)
}

// TestDefaultsAreLeftOut: from `helm get values --all` output, only what the user chose is
// converted; the official gateway's one replica, its 6-CPU limit and its pinned image tag
// are not, and the Bitnami subcharts' hundreds of defaults are no longer "not mapped".
func TestDefaultsAreLeftOut(t *testing.T) {
	mine := map[string]any{
		"timezone": "Europe/Berlin",
		"gateway":  map[string]any{"resources": map[string]any{"limits": map[string]any{"memory": "4Gi"}}},
		"postgresql": map[string]any{
			"persistence": map[string]any{"enabled": true, "size": "20Gi"},
			"primary": map[string]any{
				"resources":             map[string]any{"requests": map[string]any{"cpu": "2"}},
				"extendedConfiguration": "max_connections = 500",
			},
		},
	}
	all := allValues(t, mine)
	require.Equal(t, "6000m", lookupOr(t, all, "gateway.resources.limits.cpu"), "the official default is in --all output")

	res := Convert(all, WithDefaults("2.15.1", mustDefaults(t)))
	for _, gone := range []string{"gateway.replicas", "gateway.image", "agent.image", "gateway.resources.limits.cpu", "gateway.resources.requests", "operator.resources"} {
		_, ok := values.Lookup(res.Values, gone)
		assert.Falsef(t, ok, "%s is the official default: left out, got %v", gone, res.Values["gateway"])
	}
	assert.Equal(t, "Europe/Berlin", lookupOr(t, res.Values, "timeZone"), "a choice of the user is kept")
	assert.Equal(t, "4Gi", lookupOr(t, res.Values, "gateway.resources.limits.memory"), "a changed value inside a default map is kept")
	assert.Equal(t, "20Gi", lookupOr(t, res.Values, "postgresql.persistence.size"))
	assert.Equal(t, "2", lookupOr(t, res.Values, "postgresql.resources.requests.cpu"), "a Bitnami subchart value the user changed")
	assert.Contains(t, res.Defaults, "gateway.replicas")
	assert.Contains(t, res.Defaults, "gateway.resources.limits.cpu")
	assert.NotContains(t, res.Defaults, "gateway.resources.limits.memory")
	assert.Greater(t, len(res.Defaults), 500, "the official chart's and its subcharts' defaults are counted")
	assert.Equal(t, "2.15.1", res.DefaultsOf)
	assert.Contains(t, res.DefaultsSummary(), "value(s) equal to the official chart 2.15.1's defaults left out")
	// Only the user's Bitnami choice is left to refuse.
	var unmapped []string
	for _, e := range res.Unmapped() {
		unmapped = append(unmapped, e.Key)
	}
	assert.Equal(t, []string{"postgresql.primary.extendedConfiguration"}, unmapped)

	kept := Convert(all)
	assert.EqualValues(t, 1, lookupOr(t, kept.Values, "gateway.replicas"), "without the defaults, the official values are converted as given")
	assert.Equal(t, "6000m", lookupOr(t, kept.Values, "gateway.resources.limits.cpu"))
	assert.Equal(t, "2.15.1", lookupOr(t, kept.Values, "gateway.image.tag"))
	assert.Empty(t, kept.Defaults)
	assert.Empty(t, kept.DefaultsSummary())
	assert.Greater(t, len(kept.Unmapped()), 50, "every Bitnami default is a key the table does not know")
}

// TestDefaultsLeftOutOnlyWhenEqual: a value is left out only when it equals the default at
// its own path; a cleared default (an empty map where the chart has one) is the user's.
func TestDefaultsLeftOutOnlyWhenEqual(t *testing.T) {
	d := mustDefaults(t)
	cases := []struct {
		name string
		in   map[string]any
		left []string
	}{
		{"same number", setPath("gateway.replicas", float64(1)), []string{"gateway.replicas"}},
		{"another number", setPath("gateway.replicas", float64(3)), nil},
		{"the default list", setPath("imagePullSecrets", []any{}), []string{"imagePullSecrets"}},
		{"a cleared affinity", setPath("affinity", map[string]any{}), nil},
		{"a key the chart does not have", setPath("gateway.extraEnv", []any{"x"}), nil},
		{"a default at another path", setPath("worker.replicas", "6000m"), nil},
	}
	for _, c := range cases {
		res := Convert(c.in, WithDefaults("2.15.1", d))
		assert.Equalf(t, c.left, res.Defaults, "%s", c.name)
	}
}

// TestNodePortGatewayKeepsItsPort: the official chart fixes a NodePort gateway's port, so
// leaving the default out must not let Kubernetes move it.
func TestNodePortGatewayKeepsItsPort(t *testing.T) {
	all := allValues(t, setPath("gateway.service.type", "NodePort"))
	res := Convert(all, WithDefaults("2.15.1", mustDefaults(t)))
	assert.EqualValues(t, officialNodePort, lookupOr(t, res.Values, "gateway.service.nodePort"))
	assert.Empty(t, res.Unmapped())
}

func TestOfficialVersions(t *testing.T) {
	assert.Contains(t, OfficialVersions(), "2.15.1")
	assert.Equal(t, "2.15.1", LatestOfficialVersion())
	_, err := OfficialDefaults("2.9.0")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "known: 2.15.1")
	assert.Contains(t, err.Error(), "--keep-defaults")
}

func mustDefaults(t *testing.T) map[string]any {
	t.Helper()
	d, err := OfficialDefaults("2.15.1")
	require.NoError(t, err)
	return d
}

func lookupOr(t *testing.T, m map[string]any, path string) any {
	t.Helper()
	v, ok := values.Lookup(m, path)
	assert.Truef(t, ok, "%s missing", path)
	return v
}
