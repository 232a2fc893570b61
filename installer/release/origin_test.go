package release_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/action"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/release"
	rt "github.com/polyaxon-deploy/polyaxon-deploy/installer/release/releasetest"
)

// helmUpgrade upgrades as `helm upgrade -f` does, outside polyaxon-deploy: no inputs stored.
func helmUpgrade(t *testing.T, f *rt.Fixture, replicas int) {
	t.Helper()
	up := action.NewUpgrade(f.Config)
	up.Namespace = rt.Namespace
	_, err := up.Run(rt.Name, rt.Chart("2.0.0", "2.15.0", nil), vals("", replicas))
	require.NoError(t, err)
}

// A revision made by helm is told apart from polyaxon-deploy's, with its values; a rollback to
// it stores no older inputs for the new revision (which would pass it off as polyaxon-deploy's),
// and a rollback to one of polyaxon-deploy's revisions is polyaxon-deploy's again.
func TestOriginTellsHelmRevisionsApart(t *testing.T) {
	f := rt.New(t)
	ctx := context.Background()
	_, err := f.Client.Origin(ctx)
	require.ErrorIs(t, err, release.ErrNotInstalled)

	first := release.Inputs{Profile: "production", Set: []string{"gateway.replicas=2"}}
	install(t, f, first)
	o, err := f.Client.Origin(ctx)
	require.NoError(t, err)
	assert.False(t, o.Outside())
	assert.Equal(t, 1, o.Revision)
	assert.Equal(t, first, o.Inputs)
	assert.Equal(t, "revision 1 was made by polyaxon-deploy", o.String())

	helmUpgrade(t, f, 3)
	o, err = f.Client.Origin(ctx)
	require.NoError(t, err)
	assert.True(t, o.Outside())
	assert.Equal(t, 2, o.Revision)
	assert.Equal(t, 1, o.InputsRevision)
	assert.Equal(t, first, o.Inputs, "an upgrade would replay revision 1's inputs")
	assert.EqualValues(t, 3, o.Values["gateway"].(map[string]any)["replicas"], "helm get values of revision 2")
	assert.Contains(t, o.String(), "revision 2 was made outside polyaxon-deploy")

	_, err = f.Client.Rollback(ctx, 1)
	require.NoError(t, err)
	o, err = f.Client.Origin(ctx)
	require.NoError(t, err)
	assert.False(t, o.Outside(), "revision 3 re-applies revision 1 with its inputs")
	assert.Equal(t, 3, o.InputsRevision)

	_, err = f.Client.Rollback(ctx, 2)
	require.NoError(t, err)
	o, err = f.Client.Origin(ctx)
	require.NoError(t, err)
	assert.True(t, o.Outside(), "revision 4 re-applies helm's revision 2: not polyaxon-deploy's")
	assert.Equal(t, 4, o.Revision)
	assert.Equal(t, 3, o.InputsRevision)
	assert.Contains(t, f.Progress.String(), "revision 2 was made outside polyaxon-deploy")
}

// A release installed with helm alone has no stored inputs at all.
func TestOriginOfAHelmInstall(t *testing.T) {
	f := rt.New(t)
	in := action.NewInstall(f.Config)
	in.ReleaseName, in.Namespace = rt.Name, rt.Namespace
	_, err := in.Run(rt.Chart("2.0.0", "2.15.0", nil), vals("", 1))
	require.NoError(t, err)
	o, err := f.Client.Origin(context.Background())
	require.NoError(t, err)
	assert.True(t, o.Outside())
	assert.Equal(t, 0, o.InputsRevision)
	assert.Contains(t, o.String(), "no inputs are stored")
}
