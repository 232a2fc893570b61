package backup

import (
	"bytes"
	"io"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// readCounter counts the reads that reach the pipe.
type readCounter struct {
	r     io.Reader
	reads int
}

func (c *readCounter) Read(p []byte) (int, error) { c.reads++; return c.r.Read(p) }

// A writer that trickles small writes into a widened pipe, as pg_dump does: the coalescing
// reader takes them in a few large reads, in order and complete (a plain read of the same pipe
// takes one read per write or two).
func TestCoalescingReaderTakesSmallWritesInLargeReads(t *testing.T) {
	const writes, size = 800, 4 << 10
	var want bytes.Buffer
	for i := 0; i < writes; i++ {
		want.Write(bytes.Repeat([]byte{byte(i)}, size))
	}
	pr, pw, err := os.Pipe()
	require.NoError(t, err)
	defer pr.Close()
	capacity := widenPipe(pw)
	require.GreaterOrEqual(t, capacity, 1<<20, "the pipe widened to 1 MiB (fs.pipe-max-size allows it by default)")
	go func() {
		defer pw.Close()
		for i := 0; i < writes; i++ {
			_, _ = pw.Write(want.Bytes()[i*size : (i+1)*size])
			// A short pause without the scheduler (a sleep would last a millisecond here).
			for start := time.Now(); time.Since(start) < 20*time.Microsecond; {
			}
		}
	}()
	counted := &readCounter{r: pr}
	// Read as the encoders do: into blocks of 1 MiB.
	in, buf := coalesce(counted, capacity), make([]byte, 1<<20)
	var got bytes.Buffer
	for {
		n, err := io.ReadFull(in, buf)
		got.Write(buf[:n])
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			break
		}
		require.NoError(t, err)
	}
	require.Equal(t, want.Bytes(), got.Bytes(), "every byte, in order")
	t.Logf("%d writes of %d bytes, %d reads", writes, size, counted.reads)
	assert.Less(t, counted.reads*8, writes, "fewer reads than an eighth of the writes")
}

// A pipe that cannot hold a millisecond of a fast writer's output is read as it comes.
func TestCoalesceLeavesSmallPipesAlone(t *testing.T) {
	r := bytes.NewReader(nil)
	assert.Same(t, r, coalesce(r, 64<<10))
	assert.IsType(t, &coalescingReader{}, coalesce(r, 1<<20))
}
