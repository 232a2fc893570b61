package values_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/values"
)

func TestExampleFor(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(text), 0o600))
		return p
	}
	any := write("any.yaml", "# For every profile.\nlogLevel: INFO\n")
	prod := write("prod.yaml", "# Postgres on CloudNativePG.\n# profiles: production\npostgresql: {mode: cloudnativepg}\n")
	late := write("late.yaml", "logLevel: INFO\n# profiles: production\n")
	for _, tc := range []struct {
		path, profile string
		want          bool
	}{
		{any, "development", true}, {prod, "production", true}, {prod, "development", false},
		{late, "development", true}, // a marker after the values is not the file's
	} {
		got, err := values.ExampleFor(tc.path, tc.profile)
		require.NoError(t, err)
		assert.Equal(t, tc.want, got, "%s with %s", filepath.Base(tc.path), tc.profile)
	}

	// The repository's own files say it where a profile cannot render them.
	for file, profile := range map[string]string{"cloudnativepg.yaml": "development", "artifacts-host-path.yaml": "production"} {
		ok, err := values.ExampleFor(filepath.Join("..", "..", "values", file), profile)
		require.NoError(t, err)
		assert.False(t, ok, "%s is not for %s", file, profile)
	}
}
