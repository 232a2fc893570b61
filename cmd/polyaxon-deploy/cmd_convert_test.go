package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/convert"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/values"
)

const officialExample = "../../installer/convert/testdata/official-values-example.yaml"

// convert-values prints a values file ours accepts on stdout and the account of every key
// on stderr; a key ours cannot express fails the command with nothing on stdout, unless
// --allow-unmapped.
func TestConvertValues(t *testing.T) {
	r := runCLI(t, nil, "convert-values", officialExample)
	require.Equal(t, ExitOK, r.code, r.stderr)
	var vals map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(r.stdout), &vals))
	host, _ := values.Lookup(vals, "ingress.host")
	assert.Equal(t, "polyaxon.example.com", host)
	assert.Contains(t, r.stderr, "ingress.hostName -> ingress.host")
	assert.NotContains(t, r.stderr, "flower", "flower's values in the file are the official defaults: left out")
	assert.Contains(t, r.stderr, "value(s) equal to the official chart 2.15.1's defaults left out")
	kept := runCLI(t, nil, "convert-values", officialExample, "--keep-defaults")
	require.Equal(t, ExitOK, kept.code, kept.stderr)
	assert.Contains(t, kept.stderr, "flower: ignored: flower.enabled is off", "--keep-defaults accounts for them")

	// The converted file is a values file for ours: render takes it.
	out := writeFile(t, "new.yaml", r.stdout)
	rr := runCLI(t, nil, "render", "--profile", "development", "-f", out, "--values-only")
	require.Equal(t, ExitOK, rr.code, rr.stderr)

	bad := writeFile(t, "old.yaml", "flower:\n  enabled: true\ngateway:\n  replicas: 3\n")
	r = runCLI(t, nil, "convert-values", bad)
	assert.Equal(t, ExitError, r.code)
	assert.Empty(t, r.stdout, "no half-converted file on stdout")
	assert.Contains(t, r.stderr, "flower: ours runs no Flower")
	assert.Contains(t, r.stderr, "--allow-unmapped")

	r = runCLI(t, nil, "convert-values", bad, "--allow-unmapped")
	require.Equal(t, ExitOK, r.code, r.stderr)
	assert.Contains(t, r.stdout, "replicas: 3")
	assert.Contains(t, r.stderr, "flower: NOT MAPPED: ours runs no Flower", "listed either way")

	r = runCLI(t, nil, "convert-values")
	assert.Equal(t, ExitUsage, r.code)
}

// --from-official-values converts in memory beneath the -f files, with warnings; unmapped
// keys fail it unless --allow-unmapped.
func TestFromOfficialValues(t *testing.T) {
	over := writeFile(t, "mine.yaml", "gateway:\n  replicas: 5\n")
	r := runCLI(t, nil, "render", "--profile", "development", "--from-official-values", officialExample, "-f", over, "--values-only")
	require.Equal(t, ExitOK, r.code, r.stderr)
	var vals map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(r.stdout), &vals))
	tz, _ := values.Lookup(vals, "timeZone")
	assert.Equal(t, "Europe/Berlin", tz, "converted from timezone")
	n, _ := values.Lookup(vals, "gateway.replicas")
	assert.EqualValues(t, 5, n, "-f wins over the converted file")
	assert.Contains(t, r.stderr, "converted from the official polyaxon/polyaxon chart")

	bad := writeFile(t, "old.yaml", "ldap:\n  enabled: true\n  serverUri: ldap://x\n")
	r = runCLI(t, nil, "render", "--profile", "development", "--from-official-values", bad, "--values-only")
	assert.Equal(t, ExitError, r.code)
	assert.Contains(t, r.stderr, "ldap: ours passes no LDAP settings")
	r = runCLI(t, nil, "render", "--profile", "development", "--from-official-values", bad, "--allow-unmapped", "--values-only")
	assert.Equal(t, ExitOK, r.code, r.stderr)
	assert.Contains(t, r.stderr, "ldap is not carried over (--allow-unmapped)")
}

// `helm get values --all` output of an official 2.15.1 release: convert-values leaves out the
// official defaults and says how many, so the production profile's HA gateway is not
// overridden by the official single replica (whose PDB the chart then refuses); the user's
// own values are kept; --keep-defaults converts everything as given.
func TestConvertValuesLeavesOutOfficialDefaults(t *testing.T) {
	d, err := convert.OfficialDefaults("2.15.1")
	require.NoError(t, err)
	mine := map[string]any{"timezone": "Europe/Berlin", "ingress": map[string]any{"enabled": true, "hostName": "polyaxon.example.com"}}
	b, err := yaml.Marshal(values.Merge(d, mine))
	require.NoError(t, err)
	all := writeFile(t, "all.yaml", string(b))

	r := runCLI(t, nil, "convert-values", all)
	require.Equal(t, ExitOK, r.code, r.stderr)
	var vals map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(r.stdout), &vals))
	assert.Equal(t, map[string]any{"timeZone": "Europe/Berlin", "ingress": map[string]any{"enabled": true, "host": "polyaxon.example.com"}}, vals,
		"only the user's choices are converted")
	assert.Regexp(t, `\d{3,} value\(s\) equal to the official chart 2\.15\.1's defaults left out`, r.stderr)

	assert.Contains(t, r.stderr, "Note: the official chart had no authenticating edge (Polyaxon CE asks nobody to log in): its Ingress let anyone who reached it use the platform")

	// The production profile's edge is in front of that Ingress, and refuses to render without a way to log in.
	r = runCLI(t, nil, "render", "--profile", "production", "--from-official-values", all)
	require.Equal(t, ExitError, r.code, r.stderr)
	assert.Contains(t, r.stderr, "the official chart had no authenticating edge")
	assert.Contains(t, r.stderr, "values: edge.enabled is true (the production profile turns it on) but no way to log in is set")
	users := writeFile(t, "users.yaml", "edge: {htpasswd: {secretName: polyaxon-users}}\n")
	r = runCLI(t, nil, "render", "--profile", "production", "--from-official-values", all, "-f", users)
	require.Equal(t, ExitOK, r.code, r.stderr)
	assert.Contains(t, r.stdout, "kind: PodDisruptionBudget")
	assert.Contains(t, r.stderr, "left out as the official chart 2.15.1's defaults")

	r = runCLI(t, nil, "render", "--profile", "production", "--from-official-values", all, "--keep-defaults", "--allow-unmapped", "-f", users)
	assert.Equal(t, ExitError, r.code, "the official gateway's one replica over the profile's two")
	assert.Contains(t, r.stderr, "gateway.pdb.minAvailable")

	r = runCLI(t, nil, "convert-values", all, "--keep-defaults", "--allow-unmapped")
	require.Equal(t, ExitOK, r.code, r.stderr)
	assert.Contains(t, r.stdout, "cpu: 6000m", "--keep-defaults converts the official limits as given")
	assert.NotContains(t, r.stderr, "left out")

	r = runCLI(t, nil, "convert-values", all, "--official-chart-version", "2.9.0")
	assert.Equal(t, ExitUsage, r.code)
	assert.Contains(t, r.stderr, "known: 2.15.1")
	assert.Empty(t, r.stdout)
}
