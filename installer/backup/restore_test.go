package backup

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/pgtest"
)

// countReads makes openDump count the bytes read from dump files.
func countReads(t *testing.T) *atomic.Int64 {
	t.Helper()
	var n atomic.Int64
	orig := openDump
	openDump = func(path string) (io.ReadCloser, error) {
		f, err := orig(path)
		if err != nil {
			return nil, err
		}
		return &countingReader{ReadCloser: f, n: &n}, nil
	}
	t.Cleanup(func() { openDump = orig })
	return &n
}

type countingReader struct {
	io.ReadCloser
	n *atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.ReadCloser.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// restoreFixture is a backup of a seeded database and a target database with other contents.
type restoreFixture struct {
	s            *pgtest.Server
	m            *Manifest
	want, before map[string]string // the backup's contents; the target's before the restore
	target       *LocalTarget
}

func newRestoreFixture(t *testing.T, name string, opts ...CreateOption) *restoreFixture {
	t.Helper()
	ctx := context.Background()
	s, want := sharedServer(t)
	dst := name + "_dst"
	m, err := Create(ctx, localTarget(s, s.Database, s.BinDir), append([]CreateOption{WithOutputDir(t.TempDir()),
		WithRelease(ReleaseInfo{Name: "polyaxon", Namespace: "ns1", AppVersion: "2.15.1"})}, opts...)...)
	require.NoError(t, err)
	require.NoError(t, s.CreateDatabase(ctx, dst))
	require.NoError(t, pgtest.Seed(ctx, s, dst, pgtest.SeedSpec{Runs: 300}))
	_, err = s.Psql(ctx, dst, "UPDATE runs SET status = 'before-restore' WHERE id % 3 = 0")
	require.NoError(t, err)
	before, err := pgtest.Checksums(ctx, s, dst)
	require.NoError(t, err)
	require.NotEqual(t, want, before)
	return &restoreFixture{s: s, m: m, want: want, before: before, target: localTarget(s, dst, s.BinDir)}
}

// Restore reads the dump once: the sha256 is computed on the bytes that feed pg_restore, not
// in a verify pass before them (only the table of contents at the head is read ahead).
func TestRestoreReadsTheDumpOnce(t *testing.T) {
	f := newRestoreFixture(t, "once")
	read := countReads(t)
	_, err := Restore(context.Background(), f.target, f.m.Dir, WithToolsDir(f.s.BinDir))
	require.NoError(t, err)
	got, err := pgtest.Checksums(context.Background(), f.s, f.target.conn.Database)
	require.NoError(t, err)
	assert.Equal(t, f.want, got)
	require.Greater(t, f.m.DumpSize, int64(2<<20), "a dump large enough to tell one read from two")
	t.Logf("read %d bytes of a %d-byte dump", read.Load(), f.m.DumpSize)
	assert.Less(t, read.Load(), f.m.DumpSize+512<<10, "read %d bytes of a %d-byte dump", read.Load(), f.m.DumpSize)
}

// bothWays runs a restore test once for each way a local restore takes: by swap (the default
// jobs) and in one transaction (jobs 1).
func bothWays(t *testing.T, test func(t *testing.T, name string, way RestoreOption)) {
	for _, w := range []struct {
		name string
		opt  RestoreOption
	}{{"swap", WithJobs(2)}, {"onetx", WithJobs(1)}} {
		t.Run(w.name, func(t *testing.T) { test(t, w.name, w.opt) })
	}
}

// A dump altered in its last bytes, in a way pg_restore itself accepts (a digit of the last
// row's COPY data; no compression so no codec checksum helps): the sha256 only fails once
// the whole stream went through. In one transaction pg_restore never sees the end of it, by
// swap the spool file is never restored, so nothing is committed either way.
func TestRestoreTamperedTailCommitsNothing(t *testing.T) {
	bothWays(t, func(t *testing.T, name string, way RestoreOption) {
		ctx := context.Background()
		f := newRestoreFixture(t, "tail_"+name, WithCompression(CodecNone, 0), WithDumpCompression("0"))
		dump := filepath.Join(f.m.Dir, f.m.DumpFile)
		b, err := os.ReadFile(dump)
		require.NoError(t, err)
		i := len(b) - 1
		for ; i > len(b)-4096; i-- {
			if b[i] >= '1' && b[i] <= '8' {
				break
			}
		}
		require.Greater(t, i, len(b)-4096, "no digit in the last bytes of the dump")
		b[i]++
		require.NoError(t, os.WriteFile(dump, b, 0o600))

		sc := &fakeScaler{}
		_, err = Restore(ctx, f.target, f.m.Dir, WithToolsDir(f.s.BinDir), WithScaler(sc), way)
		require.ErrorIs(t, err, ErrChecksum)
		assert.Contains(t, err.Error(), "nothing was committed")
		assert.Equal(t, sc.downs, sc.ups, "writers scaled back")
		got, err := pgtest.Checksums(ctx, f.s, f.target.conn.Database)
		require.NoError(t, err)
		assert.Equal(t, f.before, got, "the target database is unchanged")

		// The same change with a manifest rewritten to match would be restored: proof that
		// pg_restore alone accepts it, and that only the checksum stood in the way.
		rewriteManifest(t, f.m.Dir)
		_, err = Restore(ctx, f.target, f.m.Dir, WithToolsDir(f.s.BinDir), way)
		require.NoError(t, err)
		got, err = pgtest.Checksums(ctx, f.s, f.target.conn.Database)
		require.NoError(t, err)
		assert.NotEqual(t, f.before, got)
		assert.NotEqual(t, f.want, got, "the altered digit was restored")
	})
}

// Each codec checks what it decodes: zstd's frame checksum sits in the last bytes, S2's
// CRC-32C heads each block. A damaged end with a manifest that agrees is caught by the codec
// at the very end, and nothing is committed either, with either codec, either way.
func TestRestoreDamagedCodecTailCommitsNothing(t *testing.T) {
	for _, codec := range []string{CodecS2, CodecZstd} {
		t.Run(codec, func(t *testing.T) {
			bothWays(t, func(t *testing.T, name string, way RestoreOption) {
				ctx := context.Background()
				f := newRestoreFixture(t, "codectail_"+codec+"_"+name, WithCompression(codec, 1))
				require.Equal(t, codec, f.m.Compression.Codec)
				flipByte(t, filepath.Join(f.m.Dir, f.m.DumpFile), f.m.DumpSize-2)
				rewriteManifest(t, f.m.Dir)
				_, err := Restore(ctx, f.target, f.m.Dir, WithToolsDir(f.s.BinDir), way)
				require.ErrorIs(t, err, ErrUnreadable)
				assert.Contains(t, err.Error(), "nothing was committed")
				got, err := pgtest.Checksums(ctx, f.s, f.target.conn.Database)
				require.NoError(t, err)
				assert.Equal(t, f.before, got)
			})
		})
	}
}

// A backup names its release and namespace: Restore into another refuses before anything
// changes, unless WithForce.
func TestRestoreRefusesAnotherReleasesBackup(t *testing.T) {
	ctx := context.Background()
	f := newRestoreFixture(t, "origin")
	for _, target := range [][2]string{{"staging", "ns1"}, {"polyaxon", "ml-prod"}} {
		sc := &fakeScaler{}
		_, err := Restore(ctx, f.target, f.m.Dir, WithToolsDir(f.s.BinDir), WithScaler(sc), WithTargetRelease(target[0], target[1]))
		require.ErrorIs(t, err, ErrOtherRelease)
		assert.Contains(t, err.Error(), "taken from release polyaxon in namespace ns1")
		assert.Zero(t, sc.downs)
	}
	got, err := pgtest.Checksums(ctx, f.s, f.target.conn.Database)
	require.NoError(t, err)
	assert.Equal(t, f.before, got)

	_, err = Restore(ctx, f.target, f.m.Dir, WithToolsDir(f.s.BinDir), WithTargetRelease("polyaxon", "ns1"))
	require.NoError(t, err, "its own release")
	_, err = Restore(ctx, f.target, f.m.Dir, WithToolsDir(f.s.BinDir), WithTargetRelease("staging", "ns1"), WithForce())
	require.NoError(t, err, "--force")
}

func TestChecksum(t *testing.T) {
	f := newRestoreFixture(t, "checksum")
	require.NoError(t, Checksum(context.Background(), f.m.Dir))
	flipByte(t, filepath.Join(f.m.Dir, f.m.DumpFile), f.m.DumpSize-1)
	require.ErrorIs(t, Checksum(context.Background(), f.m.Dir), ErrChecksum)
	require.NoError(t, os.Truncate(filepath.Join(f.m.Dir, f.m.DumpFile), 10))
	require.ErrorIs(t, Checksum(context.Background(), f.m.Dir), ErrTruncated)
	require.NoError(t, os.Remove(filepath.Join(f.m.Dir, ManifestFile)))
	require.ErrorIs(t, Checksum(context.Background(), f.m.Dir), ErrIncomplete)
}

func TestHoldbackKeepsTheTail(t *testing.T) {
	for _, chunk := range []int{1, 3, 7, 10, 64} {
		var out bytes.Buffer
		h := &holdback{w: &out, n: 10}
		data := []byte(strings.Repeat("0123456789abcdef", 5))
		for i := 0; i < len(data); i += chunk {
			_, err := h.Write(data[i:min(i+chunk, len(data))])
			require.NoError(t, err)
		}
		assert.Equal(t, data[:len(data)-10], out.Bytes(), "chunk %d: all but the last 10 bytes", chunk)
		require.NoError(t, h.release())
		assert.Equal(t, data, out.Bytes(), "chunk %d", chunk)
	}
}

// After the restore every table of the dump must be in the database: a restore that brought
// back only some of them (here: pg_restore told to take one table) fails, naming the others.
func TestRestoreFailsWhenATableOfTheDumpIsMissing(t *testing.T) {
	ctx := context.Background()
	f := newRestoreFixture(t, "partial")
	require.NoError(t, f.s.CreateDatabase(ctx, "partial_empty"))
	_, err := Restore(ctx, localTarget(f.s, "partial_empty", f.s.BinDir), f.m.Dir, WithToolsDir(f.s.BinDir), WithRestoreArgs("--table=runs"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "tables of the dump missing after restore")
	assert.Contains(t, err.Error(), "public.metrics")
	assert.NotContains(t, err.Error(), "public.runs,")
}
