package backup

import (
	"fmt"
	"io"
	"runtime"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
)

// Codecs applied to pg_dump's output on our side.
const (
	// CodecS2: pg_dump --compress=0, then S2 here (Snappy's format, extended; each block
	// carries a CRC-32C of its data). It costs well under half of zstd's CPU time to write and
	// to read, for files about twice as large: a backup before an upgrade is on the clock, and
	// the dump shares the CPU with the database it reads (e2e/bench/backup).
	CodecS2 = "s2"
	// CodecZstd: pg_dump --compress=0, then zstd here: the smallest files at a fast level, for
	// backups kept long.
	CodecZstd = "zstd"
	// CodecNone: the file is pg_dump's archive as is (pg_dump compresses
	// with its own default unless a dump compression is given).
	CodecNone = "none"
)

const knownCodecs = CodecS2 + ", " + CodecZstd + ", " + CodecNone

// DefaultCodec and DefaultLevel are what Create uses unless told otherwise.
const (
	DefaultCodec = CodecS2
	DefaultLevel = 1 // 1 = the codec's fastest
)

// s2Levels are S2's encoders by level: default, better, best.
var s2Levels = []s2.WriterOption{nil, s2.WriterBetterCompression(), s2.WriterBestCompression()}

// fileExt is the dump file's extension for a codec.
func fileExt(codec string) string {
	switch codec {
	case CodecS2:
		return ".s2"
	case CodecZstd:
		return ".zst"
	}
	return ""
}

func checkCodec(c Compression) error {
	switch c.Codec {
	case CodecS2:
		if c.Level < 1 || c.Level > len(s2Levels) {
			return fmt.Errorf("s2 level %d out of range 1..%d", c.Level, len(s2Levels))
		}
	case CodecZstd:
		if c.Level < 1 || c.Level > 22 {
			return fmt.Errorf("zstd level %d out of range 1..22", c.Level)
		}
	case CodecNone:
	default:
		return fmt.Errorf("unknown compression codec %q (known: %s)", c.Codec, knownCodecs)
	}
	return nil
}

// nopWriteCloser closes nothing: the caller owns the underlying file.
type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// newEncoder wraps w with the codec. Close flushes the codec (not w).
func newEncoder(w io.Writer, c Compression) (io.WriteCloser, error) {
	switch c.Codec {
	case CodecS2:
		if err := checkCodec(c); err != nil {
			return nil, err
		}
		// One goroutine, as for zstd below: S2 keeps up with the COPY stream many times over.
		opts := []s2.WriterOption{s2.WriterConcurrency(1)}
		if o := s2Levels[c.Level-1]; o != nil {
			opts = append(opts, o)
		}
		return s2.NewWriter(w, opts...), nil
	case CodecZstd:
		level := zstd.EncoderLevelFromZstd(c.Level)
		// At the fastest level one encoder, on the goroutine that reads pg_dump, keeps up with
		// the server's single COPY stream twice over, and handing blocks to another goroutine
		// only cost CPU (e2e/bench/backup's CPU line). Slower levels need the cores.
		concurrency := runtime.GOMAXPROCS(0)
		if level == zstd.SpeedFastest {
			concurrency = 1
		}
		return zstd.NewWriter(w,
			zstd.WithEncoderLevel(level),
			zstd.WithEncoderConcurrency(concurrency),
			zstd.WithEncoderCRC(true))
	case CodecNone:
		return nopWriteCloser{w}, nil
	}
	return nil, checkCodec(c)
}

// newDecoder unwraps r with the codec. Close releases decoder resources.
func newDecoder(r io.Reader, codec string) (io.ReadCloser, error) {
	switch codec {
	case CodecS2:
		return s2ReadCloser{Reader: s2.NewReader(r), concurrency: runtime.GOMAXPROCS(0)}, nil
	case CodecZstd:
		d, err := zstd.NewReader(r, zstd.WithDecoderConcurrency(runtime.GOMAXPROCS(0)), zstd.WithDecoderLowmem(false))
		if err != nil {
			return nil, err
		}
		return zstdReadCloser{d}, nil
	case CodecNone:
		return io.NopCloser(r), nil
	}
	return nil, fmt.Errorf("unknown compression codec %q in manifest (known: %s): use a newer polyaxon-deploy", codec, knownCodecs)
}

// newSyncDecoder is newDecoder without read-ahead: for reading only the head of a stream, and
// for a restore, whose pace is set by the database (a decoder on one goroutine is still many
// times faster than PostgreSQL ingests; more would only compete with it for the CPU).
func newSyncDecoder(r io.Reader, codec string) (io.ReadCloser, error) {
	if codec == CodecS2 {
		return io.NopCloser(s2.NewReader(r)), nil
	}
	if codec != CodecZstd {
		return newDecoder(r, codec)
	}
	d, err := zstd.NewReader(r, zstd.WithDecoderConcurrency(1))
	if err != nil {
		return nil, err
	}
	return zstdReadCloser{d}, nil
}

type zstdReadCloser struct{ *zstd.Decoder }

func (z zstdReadCloser) Close() error { z.Decoder.Close(); return nil }

// s2ReadCloser decodes an S2 stream; its WriteTo decodes blocks on every CPU (a spool file's
// writing then overlaps their decoding), checking each block's CRC as Read does.
type s2ReadCloser struct {
	*s2.Reader
	concurrency int
}

func (s s2ReadCloser) WriteTo(w io.Writer) (int64, error) {
	return s.DecodeConcurrent(w, s.concurrency)
}

func (s2ReadCloser) Close() error { return nil }
