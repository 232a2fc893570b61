package upgrade

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/chart"

	rt "github.com/polyaxon-deploy/polyaxon-deploy/installer/release/releasetest"
)

func meta(version, app, upgradeFrom string) *chart.Metadata {
	m := &chart.Metadata{Name: "polyaxon", Version: version, AppVersion: app}
	if upgradeFrom != "" {
		m.Annotations = map[string]string{UpgradeFromAnnotation: upgradeFrom}
	}
	return m
}

func TestCheckVersions(t *testing.T) {
	for _, tc := range []struct {
		name             string
		installed, next  *chart.Metadata
		force            bool
		wantErr, wantFix string
		wantWarning      bool
	}{
		{name: "upgrade", installed: meta("2.0.0", "2.15.0", ""), next: meta("2.1.0", "2.16.0", ">=2.0.0-0")},
		{name: "same version (values only)", installed: meta("2.1.0", "2.16.0", ""), next: meta("2.1.0", "2.16.0", ">=3.0.0")},
		{name: "app downgrade refused even with force", installed: meta("2.1.0", "2.16.0", ""), next: meta("2.0.0", "2.15.0", ""), force: true,
			wantErr: "refusing to downgrade Polyaxon from 2.16.0", wantFix: "--force does not override this"},
		{name: "app downgrade hidden behind a chart bump", installed: meta("2.1.0", "2.16.0", ""), next: meta("2.2.0", "2.15.0", ""),
			wantErr: "refusing to downgrade Polyaxon"},
		{name: "chart-only downgrade refused", installed: meta("2.1.1", "2.16.0", ""), next: meta("2.1.0", "2.16.0", ""),
			wantErr: "refusing to downgrade chart 2.1.1 to 2.1.0", wantFix: "pass --force"},
		{name: "chart-only downgrade with force", installed: meta("2.1.1", "2.16.0", ""), next: meta("2.1.0", "2.16.0", ""), force: true, wantWarning: true},
		{name: "unsupported skip", installed: meta("1.9.0", "1.20.0", ""), next: meta("2.1.0", "2.16.0", ">=2.0.0-0"), force: true,
			wantErr: "chart 2.1.0 cannot upgrade the installed chart 1.9.0 directly (it supports upgrades from >=2.0.0-0)", wantFix: "intermediate chart version"},
		{name: "prerelease installed matches a -0 constraint", installed: meta("2.0.0-rc.1", "2.15.0", ""), next: meta("2.1.0", "2.16.0", ">=2.0.0-0")},
		{name: "prerelease installed fails a plain constraint", installed: meta("2.0.0-rc.1", "2.15.0", ""), next: meta("2.1.0", "2.16.0", ">=2.0.0"),
			wantErr: "cannot upgrade the installed chart 2.0.0-rc.1"},
		{name: "bad constraint", installed: meta("2.0.0", "2.15.0", ""), next: meta("2.1.0", "2.16.0", ">>2"),
			wantErr: "is not a semver constraint"},
		{name: "bad installed version", installed: meta("latest", "2.15.0", ""), next: meta("2.1.0", "2.16.0", ""),
			wantErr: `installed chart version "latest" is not semver`},
		{name: "non-semver app versions are not compared", installed: meta("2.0.0", "main", ""), next: meta("2.1.0", "dev", "")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			warnings, err := CheckVersions(tc.installed, tc.next, tc.force)
			if tc.wantErr == "" {
				require.NoError(t, err)
				assert.Equal(t, tc.wantWarning, len(warnings) > 0)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.wantErr)
			assert.Contains(t, err.Error(), tc.wantFix)
		})
	}
}

func TestPostgresMajor(t *testing.T) {
	ch := rt.Chart("2.0.0", "2.15.0", nil)
	major, on, err := PostgresMajor(ch, nil)
	require.NoError(t, err)
	assert.Equal(t, "16", major)
	assert.True(t, on)

	major, _, err = PostgresMajor(ch, map[string]any{"postgresql": map[string]any{"image": map[string]any{"tag": "17.2-bookworm"}}})
	require.NoError(t, err)
	assert.Equal(t, "17", major)

	_, on, err = PostgresMajor(ch, map[string]any{"postgresql": map[string]any{"enabled": false}})
	require.NoError(t, err)
	assert.False(t, on)
}
