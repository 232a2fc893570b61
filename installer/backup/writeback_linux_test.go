package backup

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Every byte reaches the file, in order, and each 8 MiB written is handed to writeback.
func TestEarlyWritebackWritesEverything(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "dump"))
	require.NoError(t, err)
	defer f.Close()
	w := withEarlyWriteback(f)
	eb, ok := w.(*earlyWriteback)
	require.True(t, ok, "a regular file's descriptor is at hand")
	var want bytes.Buffer
	for i := 0; i < 20; i++ {
		chunk := bytes.Repeat([]byte{byte(i)}, 1<<20)
		want.Write(chunk)
		n, err := w.Write(chunk)
		require.NoError(t, err)
		require.Equal(t, len(chunk), n)
	}
	require.NoError(t, f.Sync())
	got, err := os.ReadFile(f.Name())
	require.NoError(t, err)
	assert.Equal(t, want.Bytes(), got)
	assert.Equal(t, int64(16<<20), eb.started, "two 8 MiB ranges handed to writeback, the last 4 MiB left to the fsync")
}
