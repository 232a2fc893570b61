package main

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/action"

	"github.com/polyaxon-deploy/polyaxon-deploy/charts"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/profile"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/release"
	rt "github.com/polyaxon-deploy/polyaxon-deploy/installer/release/releasetest"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/render"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/values"
)

// An upgrade over a revision made by helm (no inputs of its own) lists, by path, each of its
// values the replay would change, a secret's without its value, and changes nothing without
// --yes; --keep-release-values keeps them (and does not go with --reset-values).
func TestUpgradeOverAHelmRevision(t *testing.T) {
	const marker = "Mrk7x-helm-pass-3QZ"
	fx := kube137Fixture(t)
	ch, err := render.LoadFS(charts.FS, charts.Root)
	require.NoError(t, err)
	dev, err := profile.Load("development")
	require.NoError(t, err)
	_, err = fx.Client.Install(context.Background(), ch, dev.Values, release.WithInputs(release.Inputs{Profile: "development"}))
	require.NoError(t, err)

	// helm upgrade -f values/development.yaml -f mine.yaml
	up := action.NewUpgrade(fx.Config)
	up.Namespace = rt.Namespace
	mine := map[string]any{"gateway": map[string]any{"replicas": 3}, "postgresql": map[string]any{"auth": map[string]any{"password": marker}}}
	_, err = up.Run(rt.Name, ch, values.Merge(dev.Values, mine))
	require.NoError(t, err)
	history := func() map[int]string {
		h, err := fx.Client.History(context.Background(), 0)
		require.NoError(t, err)
		out := map[int]string{}
		for _, r := range h {
			out[r.Revision] = r.Status
		}
		return out
	}
	before := history()

	run := runForLeaks(t, fakeSettingsOn(t, fx.Clientset), fx, "upgrade", "--ignore", "all", "-o", "json")
	require.Equal(t, ExitUsage, run.r.code, run.r.stderr)
	assert.Contains(t, run.r.stderr, "revision 2 was made outside polyaxon-deploy (helm, a GitOps tool): the newest stored inputs are revision 1's")
	assert.Contains(t, run.r.stderr, "the upgrade would revert 2 value(s) of revision 2:\n  gateway.replicas: 3 -> 1\n  postgresql.auth.password: (secret) -> (changed)\n")
	assert.Contains(t, run.r.stderr, "--keep-release-values keeps them")
	assert.Contains(t, run.r.stdout, `"to revert: gateway.replicas: 3 -\u003e 1"`)
	assertNoLeak(t, run, marker)
	assert.Equal(t, before, history(), "nothing was changed")

	run = runForLeaks(t, fakeSettingsOn(t, fx.Clientset), fx, "upgrade", "--dry-run", "--keep-release-values", "--ignore", "all", "-o", "json")
	require.Equal(t, ExitOK, run.r.code, run.r.stderr)
	assert.Contains(t, run.r.stderr, "--keep-release-values: revision 2's values are kept")
	assert.NotContains(t, run.r.stderr, "would revert")
	assert.NotContains(t, run.r.stderr, "this run's -f/--set change", "with no -f/--set, every value of revision 2 is kept")
	assertNoLeak(t, run, marker)

	run = runForLeaks(t, nil, fx, "upgrade", "--keep-release-values", "--reset-values")
	require.Equal(t, ExitUsage, run.r.code, run.r.stderr)
	assert.Contains(t, run.r.stderr, "--keep-release-values and --reset-values: give one")
}
