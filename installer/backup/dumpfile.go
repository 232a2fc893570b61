package backup

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
)

// dumpReader reads a backup's dump file decoded, hashing the file itself as it goes (the
// manifest's sha256 is the file's, not the decoded archive's). Every reader of a whole dump
// goes through it, so that each tells an altered dump from a tool's failure the same way.
type dumpReader struct {
	file io.ReadCloser
	raw  io.Reader // the file, through the hash
	hash hash.Hash
	dec  io.ReadCloser
}

// openDumpReader opens dump through codec. A sync reader decodes on the caller's goroutine
// (for a restore, whose pace PostgreSQL sets); otherwise the decoder reads ahead on all CPUs.
func openDumpReader(ctx context.Context, dump, codec string, sync bool) (*dumpReader, error) {
	f, err := openDump(dump)
	if err != nil {
		return nil, err
	}
	d := &dumpReader{file: f, hash: sha256.New()}
	d.raw = io.TeeReader(bufio.NewReaderSize(ctxReader{ctx: ctx, r: f}, 1<<20), d.hash)
	newDec := newDecoder
	if sync {
		newDec = newSyncDecoder
	}
	if d.dec, err = newDec(d.raw, codec); err != nil {
		_ = f.Close()
		return nil, err
	}
	return d, nil
}

// Read reads the decoded archive.
func (d *dumpReader) Read(p []byte) (int, error) { return d.dec.Read(p) }

// WriteTo hands the decoder's blocks to w as they are where the decoder can (zstd's; S2's
// decoding them on every CPU for a spool file), else copies them through a buffer of 1 MiB: a
// file's own ReadFrom would write 32 KiB at a time.
func (d *dumpReader) WriteTo(w io.Writer) (int64, error) {
	if wt, ok := d.dec.(io.WriterTo); ok {
		return wt.WriteTo(w)
	}
	return io.CopyBuffer(struct{ io.Writer }{w}, d.dec, make([]byte, 1<<20))
}

func (d *dumpReader) Close() error {
	_ = d.dec.Close()
	return d.file.Close()
}

// sum reads whatever of the file the decoder did not need (the rest of it after a decoding
// error) and returns the file's sha256.
func (d *dumpReader) sum() (string, error) {
	if _, err := io.Copy(io.Discard, d.raw); err != nil {
		return "", err
	}
	return hex.EncodeToString(d.hash.Sum(nil)), nil
}

// verified is nil once the whole file was read and its sha256 is the manifest's. after says
// what state the caller leaves behind on an error.
func (d *dumpReader) verified(p DumpPart, after string) error {
	sum, err := d.sum()
	if err != nil {
		return fmt.Errorf("reading %s: %w; %s", p.File, err, after)
	}
	return checksumError(p, sum, nil, after)
}

// altered explains a failure (cause: what tripped first on the damage) as an altered dump when
// the file's sha256 differs from the manifest's; nil when it does not or cannot be read.
func (d *dumpReader) altered(p DumpPart, cause error, after string) error {
	sum, err := d.sum()
	if err != nil {
		return nil
	}
	return checksumError(p, sum, cause, after)
}

// checksumError is an ErrChecksum error when sum is not the manifest's sha256 of the file,
// else nil.
func checksumError(p DumpPart, sum string, cause error, after string) error {
	if sum == p.SHA256 {
		return nil
	}
	msg := fmt.Sprintf("sha256 of %s is %s but the manifest recorded %s: the dump was altered or damaged after the backup", p.File, sum, p.SHA256)
	if cause != nil {
		msg += fmt.Sprintf(" (%v)", cause)
	}
	if after != "" {
		msg += "; " + after
	}
	return fmt.Errorf("%w: %s; %s", ErrChecksum, msg, fixHint)
}
