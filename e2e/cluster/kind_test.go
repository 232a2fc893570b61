package cluster

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestStaleSnapshotsAreOnlyOldDirectoriesOfNoLiveCluster(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	for name, age := range map[string]time.Duration{
		"e2e-kind-killed":      2 * time.Hour, // its test binary was killed
		"e2e-kind-live":        2 * time.Hour, // still running
		"e2e-kind-starting":    time.Minute,   // being created by another process
		"kind-images-12345":    time.Hour,     // a load's archives, left behind
		"kind-images-loading":  time.Minute,
		"not-a-directory.file": 2 * time.Hour,
	} {
		p := filepath.Join(dir, name)
		if filepath.Ext(name) == ".file" {
			require.NoError(t, os.WriteFile(p, nil, 0o600))
		} else {
			require.NoError(t, os.Mkdir(p, 0o700))
		}
		require.NoError(t, os.Chtimes(p, now.Add(-age), now.Add(-age)))
	}
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"e2e-kind-killed", "kind-images-12345"}, staleSnapshots(entries, []string{"e2e-kind-live"}, now))
}
