package backup

import (
	"bufio"
	"errors"
	"fmt"
	"io"
)

// Reading a pg_dump custom-format archive in one pass, as pg_dump writes it to a pipe: the
// header, the table of contents, then each entry's data as a block of chunks. A stream's
// archive is loaded by our process (copyload.go) without pg_restore turning it into SQL and
// psql parsing that SQL back: the COPY data go to the server as they are in the archive.
// Only what that needs is read; an archive this reader does not know (a version outside
// archiveVersions, compressed data) is left to pg_restore.

// archiveVersion is a custom archive's format version (major, minor, revision).
type archiveVersion [3]byte

func (v archiveVersion) atLeast(minor byte) bool { return v[0] > 1 || (v[0] == 1 && v[1] >= minor) }

func (v archiveVersion) String() string { return fmt.Sprintf("%d.%d-%d", v[0], v[1], v[2]) }

// The versions read here: 1.14 (pg_dump 12 to 15), 1.15 (16: the compression's algorithm
// replaces its level in the header) and 1.16 (17: each entry has a relkind). Older and newer
// archives are pg_restore's.
const (
	archiveMinMinor = 14
	archiveMaxMinor = 16
)

// The sections of an entry (pg_backup.h's teSection).
const sectionData = 3

// The custom format's data block types (pg_backup_custom.c).
const blockData = 1

// archiveHeader is what the header says that the reader needs.
type archiveHeader struct {
	version archiveVersion
	// compressed: the data chunks are compressed (a level above 0 before 1.15, an algorithm
	// other than none from 1.15).
	compressed bool
	intSize    int
	offSize    int
}

// archiveEntry is one entry of the table of contents.
type archiveEntry struct {
	dumpID    int
	hadDumper bool
	tag       string
	desc      string
	section   int
	defn      string
	copyStmt  string
	namespace string
}

// archiveReader reads an archive's fields in order.
type archiveReader struct {
	r   *bufio.Reader
	hdr archiveHeader
	// tocLeft is what the strings of the header and the table of contents may still hold: a
	// stream's has a few entries, and an altered one is read before its sha256 is known.
	tocLeft int
}

// maxTOCBytes bounds the strings of an archive's table of contents.
const maxTOCBytes = 64 << 20

// errNotReadable says that the archive is one this reader leaves to pg_restore.
var errNotReadable = errors.New("an archive pg_restore reads")

func newArchiveReader(r io.Reader) *archiveReader {
	return &archiveReader{r: bufio.NewReaderSize(r, 256<<10), tocLeft: maxTOCBytes}
}

func (a *archiveReader) byte() (byte, error) { return a.r.ReadByte() }

// int reads an integer: a sign byte (1: negative), then intSize bytes, least significant first.
// A data block has one before each chunk, which is a row of a table: read from what the
// buffer holds, not a byte at a time.
func (a *archiveReader) int() (int, error) {
	b, err := a.r.Peek(1 + a.hdr.intSize)
	if err != nil {
		return 0, noEOFWithin(err, len(b))
	}
	var v uint64
	for i, c := range b[1:] {
		v |= uint64(c) << (8 * i)
	}
	sign := b[0]
	_, _ = a.r.Discard(len(b))
	if v > 1<<31 {
		return 0, fmt.Errorf("an integer of %d in the archive", v)
	}
	if sign != 0 {
		return -int(v), nil
	}
	return int(v), nil
}

// noEOFWithin: an archive that ends after some of a field's bytes is cut short; io.EOF is
// kept where no byte of the field was there (the end of the blocks).
func noEOFWithin(err error, got int) error {
	if got > 0 {
		return noEOF(err)
	}
	return err
}

// str reads a string: its length (-1: NULL, read as ""), then its bytes.
func (a *archiveReader) str() (string, error) {
	n, err := a.int()
	if err != nil || n <= 0 {
		return "", err
	}
	if n > a.tocLeft {
		return "", fmt.Errorf("a table of contents of more than %d bytes", maxTOCBytes)
	}
	a.tocLeft -= n
	b := make([]byte, n)
	if _, err := io.ReadFull(a.r, b); err != nil {
		return "", err
	}
	return string(b), nil
}

// skip reads n fields with read and drops them.
func skip[T any](n int, read func() (T, error)) error {
	for range n {
		if _, err := read(); err != nil {
			return err
		}
	}
	return nil
}

// header reads the header. An archive of a version or compression outside what this reader
// knows is errNotReadable.
func (a *archiveReader) header() error {
	magic := make([]byte, 5)
	if _, err := io.ReadFull(a.r, magic); err != nil {
		return err
	}
	if string(magic) != "PGDMP" {
		return errors.New("not a pg_dump archive")
	}
	h := &a.hdr
	for i := range h.version {
		b, err := a.byte()
		if err != nil {
			return err
		}
		h.version[i] = b
	}
	if h.version[0] != 1 || h.version[1] < archiveMinMinor || h.version[1] > archiveMaxMinor {
		return fmt.Errorf("%w: version %s", errNotReadable, h.version)
	}
	sizes := make([]byte, 3)
	if _, err := io.ReadFull(a.r, sizes); err != nil {
		return err
	}
	h.intSize, h.offSize = int(sizes[0]), int(sizes[1])
	if h.intSize < 4 || h.intSize > 8 || h.offSize < 4 || h.offSize > 8 || sizes[2] != 1 {
		return fmt.Errorf("%w: integers of %d bytes, offsets of %d, format %d", errNotReadable, h.intSize, h.offSize, sizes[2])
	}
	if h.version.atLeast(15) {
		algorithm, err := a.byte()
		if err != nil {
			return err
		}
		h.compressed = algorithm != 0
	} else {
		level, err := a.int()
		if err != nil {
			return err
		}
		h.compressed = level != 0
	}
	if h.compressed {
		return fmt.Errorf("%w: its data are compressed", errNotReadable)
	}
	// The time it was made (7 integers), the database's name, the server's and pg_dump's
	// versions.
	if err := skip(7, a.int); err != nil {
		return err
	}
	return skip(3, a.str)
}

// toc reads the table of contents.
func (a *archiveReader) toc() ([]archiveEntry, error) {
	n, err := a.int()
	if err != nil {
		return nil, err
	}
	if n < 0 || n > maxTOCBytes/32 { // an entry has more than 32 bytes
		return nil, fmt.Errorf("a table of contents of %d entries", n)
	}
	entries := make([]archiveEntry, 0, min(n, 4096))
	for range n {
		e, err := a.entry()
		if err != nil {
			return nil, fmt.Errorf("reading the archive's table of contents: %w", err)
		}
		entries = append(entries, e)
	}
	return entries, nil
}

func (a *archiveReader) entry() (e archiveEntry, err error) {
	var hadDumper int
	fields := []func() error{
		func() (err error) { e.dumpID, err = a.int(); return },
		func() (err error) { hadDumper, err = a.int(); return },
		func() error { return skip(2, a.str) }, // the catalog's table OID and the object's OID
		func() (err error) { e.tag, err = a.str(); return },
		func() (err error) { e.desc, err = a.str(); return },
		func() (err error) { e.section, err = a.int(); return },
		func() (err error) { e.defn, err = a.str(); return },
		func() error { _, err := a.str(); return err }, // the DROP statement
		func() (err error) { e.copyStmt, err = a.str(); return },
		func() (err error) { e.namespace, err = a.str(); return },
		func() error { return skip(2, a.str) }, // tablespace, table access method
	}
	if a.hdr.version.atLeast(16) {
		fields = append(fields, func() error { _, err := a.int(); return err }) // relkind
	}
	fields = append(fields,
		func() error { return skip(2, a.str) }, // owner, "with OIDs" (always false)
		a.dependencies,
		func() error { _, err := a.offset(); return err },
	)
	for _, f := range fields {
		if err := f(); err != nil {
			return e, err
		}
	}
	e.hadDumper = hadDumper != 0
	return e, nil
}

// dependencies reads an entry's dependencies: strings up to a NULL one.
func (a *archiveReader) dependencies() error {
	for {
		n, err := a.int()
		if err != nil {
			return err
		}
		if n < 0 {
			return nil
		}
		if n > a.tocLeft {
			return fmt.Errorf("a table of contents of more than %d bytes", maxTOCBytes)
		}
		a.tocLeft -= n
		if _, err := a.r.Discard(n); err != nil {
			return err
		}
	}
}

// offset reads the custom format's data offset of an entry: a flag, then offSize bytes.
func (a *archiveReader) offset() (int64, error) {
	if _, err := a.byte(); err != nil {
		return 0, err
	}
	var v int64
	for i := range a.hdr.offSize {
		b, err := a.byte()
		if err != nil {
			return 0, err
		}
		v |= int64(b) << (8 * i)
	}
	return v, nil
}

// nextBlock reads the next data block's header: its entry's dump ID. io.EOF: no more blocks.
func (a *archiveReader) nextBlock() (int, error) {
	kind, err := a.byte()
	if err != nil {
		return 0, err
	}
	if kind != blockData { // 3: large objects, which the table of contents would have listed
		return 0, fmt.Errorf("a data block of type %d", kind)
	}
	id, err := a.int()
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return id, err
}

// blockData returns a reader of the current block's data: its chunks, in order, up to the
// zero length that ends them.
func (a *archiveReader) blockData() io.Reader { return &chunkReader{a: a} }

type chunkReader struct {
	a    *archiveReader
	left int
	done bool
}

func (c *chunkReader) Read(p []byte) (int, error) {
	for c.left == 0 {
		if c.done {
			return 0, io.EOF
		}
		n, err := c.a.int()
		if err != nil {
			return 0, noEOF(err)
		}
		if n < 0 {
			return 0, fmt.Errorf("a data chunk of %d bytes", n)
		}
		c.left, c.done = n, n == 0
	}
	n, err := c.a.r.Read(p[:min(len(p), c.left)])
	c.left -= n
	return n, noEOF(err)
}

// noEOF: an archive that ends inside a block is cut short.
func noEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}
