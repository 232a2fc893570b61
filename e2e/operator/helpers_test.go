package operator

import (
	"bytes"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

// The resources in testdata/*.json were written by Polyaxon's converter (testdata/gen.py).
var fixtures = []string{"job", "service", "tfjob", "pytorchjob", "mpijob", "raycluster", "daskcluster"}

// fixture is testdata/<name>.json as the API server would return it: integers as int64 and a
// uid.
func fixture(t *testing.T, name string) *unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name+".json"))
	require.NoError(t, err)
	obj, err := runtime.Decode(unstructured.UnstructuredJSONScheme, data)
	require.NoError(t, err)
	u := obj.(*unstructured.Unstructured)
	u.SetUID(types.UID("uid-" + name))
	return u
}

func allEnabled(Backend) bool { return true }

// testLog is a logger whose lines the test can read.
func testLog(w io.Writer) *slog.Logger {
	if w == nil {
		w = io.Discard
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// syncBuffer is a bytes.Buffer safe for a logger's goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func newSyncBuffer() *syncBuffer { return &syncBuffer{} }

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
