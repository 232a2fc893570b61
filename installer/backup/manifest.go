// Package backup takes, verifies, lists and restores backups of the
// Polyaxon PostgreSQL database.
//
// A backup is a directory <output>/<release>-<UTC timestamp>/ holding the
// dump (pg_dump custom format, compressed on our side by the codec named in
// the manifest), secrets.json (the release's Secrets, mode 0600) and
// manifest.json, written last: a directory without a manifest is an
// unfinished backup and never verifies. A dump taken in parallel streams
// (streams.go) is several such archives, one per stream, all of one snapshot.
//
// Dumps are streamed (database -> compressor -> sha256 -> file) and never
// held in memory. Passwords come from the environment of the process that
// runs pg_dump/pg_restore (PGPASSWORD), never from a command line.
package backup

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// File names inside a backup directory.
const (
	ManifestFile = "manifest.json"
	SecretsFile  = "secrets.json"
	// DumpBaseName is the dump's name before the codec's extension.
	DumpBaseName = "database.dump"
	partialExt   = ".partial"
)

// Manifest layout versions. A dump in one archive is written as FormatVersion, which older
// polyaxon-deploy read too; a dump in parallel streams as FormatVersionStreams, so that an
// older polyaxon-deploy refuses it instead of restoring its first stream alone.
const (
	FormatVersion        = 1
	FormatVersionStreams = 2
	newestFormat         = FormatVersionStreams
)

// Source kinds recorded in the manifest.
const (
	SourceInCluster = "in-cluster"
	SourceExternal  = "external"
	SourceLocal     = "local"
)

// Manifest describes one backup.
type Manifest struct {
	FormatVersion int `json:"formatVersion"`

	Release      string `json:"release,omitempty"`
	Namespace    string `json:"namespace,omitempty"`
	Revision     int    `json:"revision,omitempty"`
	ChartVersion string `json:"chartVersion,omitempty"`
	AppVersion   string `json:"appVersion,omitempty"`

	Source string `json:"source"` // in-cluster, external or local
	// Origin names the endpoint without secrets (pod, host:port).
	Origin   string `json:"origin,omitempty"`
	Database string `json:"database"`

	ServerVersion    string `json:"serverVersion"`
	ServerVersionNum int    `json:"serverVersionNum"`
	DatabaseSize     int64  `json:"databaseSize"` // pg_database_size at start, bytes

	DumpFile string `json:"dumpFile"`
	// DumpFormat is pg_dump's --format (always "custom").
	DumpFormat string `json:"dumpFormat"`
	// DumpCompression is pg_dump's own --compress value inside the archive.
	DumpCompression string      `json:"dumpCompression"`
	Compression     Compression `json:"compression"`
	DumpSize        int64       `json:"dumpSize"` // bytes of the dump file
	RawSize         int64       `json:"rawSize"`  // bytes pg_dump wrote, before our compression
	SHA256          string      `json:"sha256"`   // of the dump file

	// Streams are the archives of a dump taken in parallel streams (formatVersion 2), in
	// restore order: the first holds the schema and the data of every table the others do not
	// carry. DumpFile is then the first's name, DumpSize and RawSize are the sums, and SHA256
	// is empty: each stream has its own.
	Streams []DumpPart `json:"streams,omitempty"`

	Secrets     bool     `json:"secrets"` // secrets.json present
	SecretNames []string `json:"secretNames,omitempty"`

	// Rows is each table's row count ("schema.table"), counted in the dump's own snapshot, so
	// equal to the dump's even while something writes (a restore compares against them).
	// Counted right after the dump by a server that cannot export a snapshot.
	Rows map[string]int64 `json:"rows,omitempty"`

	StartedAt  time.Time `json:"startedAt"`
	FinishedAt time.Time `json:"finishedAt"`

	// Encryption, when set, says the dump's parts and secrets.json are sealed with age
	// (encrypt.go): the files above are then only in their sealed form.
	Encryption *Encryption `json:"encryption,omitempty"`

	// Dir is the backup directory (not stored).
	Dir string `json:"-"`
}

// Compression is the stream codec applied on our side to pg_dump's output.
type Compression struct {
	Codec string `json:"codec"` // zstd or none
	Level int    `json:"level,omitempty"`
}

// DumpPart is one archive file of a dump.
type DumpPart struct {
	File    string `json:"file"`
	Size    int64  `json:"size"`    // bytes of the file
	RawSize int64  `json:"rawSize"` // bytes pg_dump wrote, before our compression
	SHA256  string `json:"sha256"`  // of the file
	// Tables are the tables whose data a stream other than the first carries.
	Tables []string `json:"tables,omitempty"`
}

// Parts are the dump's archive files, the first holding the schema: one for a dump in one
// archive, one per stream otherwise.
func (m *Manifest) Parts() []DumpPart {
	if len(m.Streams) > 0 {
		return m.Streams
	}
	return []DumpPart{{File: m.DumpFile, Size: m.DumpSize, RawSize: m.RawSize, SHA256: m.SHA256}}
}

// Layout says how the dump is stored, for people: "one archive" or "N parallel streams".
func (m *Manifest) Layout() string {
	layout := "one archive"
	if n := len(m.Streams); n > 0 {
		layout = fmt.Sprintf("%d parallel streams", n)
	}
	if m.Encryption != nil {
		layout += ", sealed (age)"
	}
	return layout
}

// Duration is how long the dump took.
func (m *Manifest) Duration() time.Duration { return m.FinishedAt.Sub(m.StartedAt) }

// ReadManifest reads dir/manifest.json.
func ReadManifest(dir string) (*Manifest, error) {
	b, err := os.ReadFile(filepath.Join(dir, ManifestFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("backup %s: no %s: the backup did not finish (its dump failed or was interrupted); take a new backup: %w", dir, ManifestFile, err)
	}
	if err != nil {
		return nil, fmt.Errorf("backup %s: reading %s: %w", dir, ManifestFile, err)
	}
	return ParseManifest(b, dir)
}

// ParseManifest reads a manifest's bytes of the backup at dir (a directory, or wherever the
// backup is), checking that every file it names is a plain file name.
func ParseManifest(b []byte, dir string) (*Manifest, error) {
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("backup %s: %s is not valid JSON: %w", dir, ManifestFile, err)
	}
	if m.FormatVersion < 1 || m.FormatVersion > newestFormat {
		return nil, fmt.Errorf("backup %s: %s has formatVersion %d, this polyaxon-deploy reads 1..%d: use a newer polyaxon-deploy", dir, ManifestFile, m.FormatVersion, newestFormat)
	}
	if (m.FormatVersion == FormatVersionStreams) != (len(m.Streams) > 0) {
		return nil, fmt.Errorf("backup %s: %s has formatVersion %d and %d streams: a dump in streams is formatVersion %d, and only it", dir, ManifestFile, m.FormatVersion, len(m.Streams), FormatVersionStreams)
	}
	for _, p := range m.Parts() {
		if p.File == "" || p.File == "." || p.File == ".." || filepath.Base(p.File) != p.File || p.File == ManifestFile || p.File == SecretsFile {
			return nil, fmt.Errorf("backup %s: %s: dump file %q must be a plain file name", dir, ManifestFile, p.File)
		}
	}
	if m.Encryption != nil {
		for _, f := range m.Encryption.Files {
			if f.Plain == "" || f.Plain == "." || f.Plain == ".." || filepath.Base(f.Plain) != f.Plain || f.Plain == ManifestFile || f.File != f.Plain+EncryptedExt {
				return nil, fmt.Errorf("backup %s: %s: sealed file %q (of %q) must be a plain file name with %s", dir, ManifestFile, f.File, f.Plain, EncryptedExt)
			}
		}
	}
	m.Dir = dir
	return &m, nil
}

// writeFileAtomic writes name in dir via a temporary file, fsync and rename.
func writeFileAtomic(dir, name string, data []byte, mode os.FileMode) error {
	tmp := filepath.Join(dir, name+partialExt)
	_ = os.Remove(tmp) // left by a crash; a backup is written under its release's lock
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_WRONLY, mode)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(mode) // umask may have narrowed it; never widen beyond mode
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, name))
	}
	if err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return syncDir(dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
