package backup

import (
	"fmt"
	"io"
	"runtime"

	"github.com/klauspost/compress/zstd"
)

// Codecs applied to pg_dump's output on our side.
const (
	// CodecZstd: pg_dump --compress=0, then zstd here. zstd at a fast level
	// beats pg_dump's built-in gzip by a wide margin on CPU time.
	CodecZstd = "zstd"
	// CodecNone: the file is pg_dump's archive as is (pg_dump compresses
	// with its own default unless a dump compression is given).
	CodecNone = "none"
)

// DefaultCodec and DefaultLevel are what Create uses unless told otherwise.
const (
	DefaultCodec = CodecZstd
	DefaultLevel = 1 // zstd level (1 = fastest)
)

// fileExt is the dump file's extension for a codec.
func fileExt(codec string) string {
	if codec == CodecZstd {
		return ".zst"
	}
	return ""
}

func checkCodec(c Compression) error {
	switch c.Codec {
	case CodecZstd:
		if c.Level < 1 || c.Level > 22 {
			return fmt.Errorf("zstd level %d out of range 1..22", c.Level)
		}
	case CodecNone:
	default:
		return fmt.Errorf("unknown compression codec %q (known: %s, %s)", c.Codec, CodecZstd, CodecNone)
	}
	return nil
}

// nopWriteCloser closes nothing: the caller owns the underlying file.
type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// newEncoder wraps w with the codec. Close flushes the codec (not w).
func newEncoder(w io.Writer, c Compression) (io.WriteCloser, error) {
	switch c.Codec {
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
	case CodecZstd:
		d, err := zstd.NewReader(r, zstd.WithDecoderConcurrency(runtime.GOMAXPROCS(0)), zstd.WithDecoderLowmem(false))
		if err != nil {
			return nil, err
		}
		return zstdReadCloser{d}, nil
	case CodecNone:
		return io.NopCloser(r), nil
	}
	return nil, fmt.Errorf("unknown compression codec %q in manifest (known: %s, %s): use a newer polyaxon-deploy", codec, CodecZstd, CodecNone)
}

// newSyncDecoder is newDecoder without read-ahead: for reading only the head of a stream, and
// for a restore, whose pace is set by the database (a decoder on one goroutine is still many
// times faster than PostgreSQL ingests; more would only compete with it for the CPU).
func newSyncDecoder(r io.Reader, codec string) (io.ReadCloser, error) {
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
