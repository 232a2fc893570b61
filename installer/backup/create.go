package backup

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sync/errgroup"
)

// TimestampLayout is the UTC timestamp in backup directory names.
const TimestampLayout = "20060102T150405Z"

// ServerInfo is what Create asks the server before dumping.
type ServerInfo struct {
	Version      string
	VersionNum   int
	DatabaseSize int64
	Database     string
}

// QueryServer asks the target for its version and database size.
func QueryServer(ctx context.Context, t Target) (*ServerInfo, error) {
	answer, err := psqlQuery(ctx, t,
		"SELECT current_setting('server_version'), current_setting('server_version_num'), pg_database_size(current_database()), current_database()")
	if err != nil {
		return nil, fmt.Errorf("querying PostgreSQL server (%s): %w", t, err)
	}
	f := strings.Split(answer, "|")
	if len(f) != 4 {
		return nil, fmt.Errorf("querying PostgreSQL server (%s): unexpected answer %q", t, answer)
	}
	num, err1 := strconv.Atoi(f[1])
	size, err2 := strconv.ParseInt(f[2], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return nil, fmt.Errorf("querying PostgreSQL server (%s): unexpected answer %q: %w", t, answer, err)
	}
	return &ServerInfo{Version: f[0], VersionNum: num, DatabaseSize: size, Database: f[3]}, nil
}

// Create dumps the database of src into a new backup directory under the
// output directory and returns its manifest (Manifest.Dir is the
// directory). Options: WithOutputDir, WithRelease, WithSecrets,
// WithCompression, WithDumpCompression, WithDumpArgs, WithLogger,
// WithProgress, WithClock, WithCleanupRegistry.
//
// On any failure, cancellation or panic the directory is removed: no partial
// dump is left behind, and a dump counts only when pg_dump exited 0.
func Create(ctx context.Context, src Target, opts ...CreateOption) (_ *Manifest, err error) {
	cfg := newConfig(opts)
	if err := checkCodec(cfg.compression); err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	log := cfg.logger
	started := cfg.now().UTC()

	info, err := QueryServer(ctx, src)
	if err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}

	name := cfg.release.Name
	if name == "" {
		name = info.Database
	}
	dir, err := makeBackupDir(cfg.outputDir, name+"-"+started.Format(TimestampLayout))
	if err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	// The directory goes on every way out but success: an error, a cancellation, a panic
	// (this defer runs while it unwinds), and a process exit the caller runs cleanups for.
	finished := false
	defer func() {
		if finished {
			return
		}
		if rerr := os.RemoveAll(dir); rerr != nil && err != nil {
			err = errors.Join(err, fmt.Errorf("removing unfinished backup %s: %w", dir, rerr))
		}
	}()
	if cfg.registerCleanup != nil {
		unregister := cfg.registerCleanup(func() { _ = os.RemoveAll(dir) })
		defer unregister()
	}

	m := &Manifest{
		FormatVersion:    FormatVersion,
		Release:          cfg.release.Name,
		Namespace:        cfg.release.Namespace,
		Revision:         cfg.release.Revision,
		ChartVersion:     cfg.release.ChartVersion,
		AppVersion:       cfg.release.AppVersion,
		Source:           src.Kind(),
		Origin:           src.String(),
		Database:         info.Database,
		ServerVersion:    info.Version,
		ServerVersionNum: info.VersionNum,
		DatabaseSize:     info.DatabaseSize,
		DumpFormat:       "custom",
		DumpCompression:  cfg.dumpCompression,
		Compression:      cfg.compression,
		StartedAt:        started,
		Dir:              dir,
	}
	if cfg.compression.Codec == CodecNone {
		m.Compression.Level = 0
	}
	if m.DumpCompression == "" {
		m.DumpCompression = "default"
	}

	// Secrets first: a missing permission should fail before a long dump.
	if cfg.secrets != nil {
		doc, names, err := cfg.secrets(ctx)
		if err != nil {
			return nil, fmt.Errorf("backup: saving the release's Secrets: %w", err)
		}
		if err := writeFileAtomic(dir, SecretsFile, doc, 0o600); err != nil {
			return nil, fmt.Errorf("backup: writing %s: %w", filepath.Join(dir, SecretsFile), err)
		}
		m.Secrets, m.SecretNames = true, names
	}

	// Row counts let a restore be compared with what was backed up; the dump is good without
	// them. Counted in the dump's own snapshot, they describe the dump and cost no time of
	// their own; a server that cannot export a snapshot has them counted after the dump.
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	snap, err := openSnapshot(sctx, src)
	if err != nil {
		log.Warn("row counts will be taken after the dump, not in its snapshot; the dump is taken in one stream", "error", err)
	}
	var streams [][]streamTable
	snapshotID := ""
	if snap != nil {
		snapshotID = snap.id
		streams = planDump(ctx, src, snap, cfg)
	}
	counted := make(chan rowCounts, 1)
	if snap != nil {
		go func() {
			rows, err := snap.countRows()
			counted <- rowCounts{rows, err}
		}()
	}

	log.Info("dumping database", "origin", src.String(), "database", info.Database,
		"server", info.Version, "size", info.DatabaseSize, "codec", cfg.compression.Codec, "streams", len(streams)+1, "dir", dir)
	if err := dumpStreams(ctx, src, cfg, dir, m, snapshotID, streams); err != nil {
		return nil, fmt.Errorf("backup of %s: %w", src, err)
	}
	m.FinishedAt = cfg.now().UTC()
	var counts rowCounts
	if snap != nil {
		counts = <-counted
		if err := snap.close(); err != nil && counts.err == nil {
			counts.err = err
		}
	} else {
		counts.rows, counts.err = CountRows(ctx, src)
	}
	if counts.err != nil {
		log.Warn("row counts not recorded", "error", counts.err)
	} else {
		m.Rows = counts.rows
	}

	doc, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	if err := writeFileAtomic(dir, ManifestFile, append(doc, '\n'), 0o600); err != nil {
		return nil, fmt.Errorf("backup: writing %s: %w", filepath.Join(dir, ManifestFile), err)
	}
	log.Info("backup written", "dir", dir, "dumpSize", m.DumpSize, "rawSize", m.RawSize,
		"seconds", m.Duration().Seconds())
	finished = true
	return m, nil
}

// makeBackupDir creates out/base (0700), adding a suffix if it exists.
func makeBackupDir(out, base string) (string, error) {
	if err := os.MkdirAll(out, 0o700); err != nil {
		return "", fmt.Errorf("creating output directory %s: %w", out, err)
	}
	for i := 0; i < 100; i++ {
		name := base
		if i > 0 {
			name = fmt.Sprintf("%s-%d", base, i)
		}
		dir := filepath.Join(out, name)
		err := os.Mkdir(dir, 0o700)
		if err == nil {
			return dir, os.Chmod(dir, 0o700)
		}
		if !errors.Is(err, fs.ErrExist) {
			return "", fmt.Errorf("creating backup directory %s: %w", dir, err)
		}
	}
	return "", fmt.Errorf("creating backup directory %s: too many backups with the same timestamp", filepath.Join(out, base))
}

// planDump shares the tables among the backup's streams (streams.go), in the dump's snapshot;
// nil for a dump in one archive. It never fails the backup: a plan it cannot make is one stream.
func planDump(ctx context.Context, src Target, snap *snapshotSession, cfg *config) [][]streamTable {
	if cfg.dumpJobs == 1 {
		return nil
	}
	if len(cfg.dumpArgs) > 0 {
		// pg_dump's own selection (--table, --exclude-table-data, ...) would not hold for the
		// tables the plan hands to streams of their own.
		cfg.logger.Info("the dump is taken in one stream: pg_dump flags were given", "flags", strings.Join(cfg.dumpArgs, " "))
		return nil
	}
	answer, err := snap.ask(tableSizesSQL + ";\n")
	var tables []streamTable
	if err == nil {
		tables, err = parseTableSizes(strings.Join(answer, ""))
	}
	if err != nil {
		cfg.logger.Warn("the dump is taken in one stream: the tables' sizes could not be read", "error", err)
		return nil
	}
	n := cfg.dumpJobs
	if n == 0 {
		n = defaultStreams(func() int { return serverCores(ctx, src) }, tables)
	}
	return planStreams(tables, n)
}

// dumpStreams dumps into dir: one archive, or one per stream (all in the exported snapshot),
// run at once. The first failure stops the others; none is kept unless all succeeded.
func dumpStreams(ctx context.Context, src Target, cfg *config, dir string, m *Manifest, snapshot string, streams [][]streamTable) error {
	base := []string{"--format=custom", "--no-password"}
	if cfg.dumpCompression != "" {
		base = append(base, "--compress="+cfg.dumpCompression)
	}
	if snapshot != "" {
		base = append(base, "--snapshot="+snapshot)
	}
	args := streamArgs(base, streams, cfg.dumpArgs)
	parts := make([]DumpPart, len(args))
	progress := &sharedProgress{report: cfg.progress}
	g, gctx := errgroup.WithContext(ctx)
	for i := range args {
		parts[i].File = streamFile(i, cfg.compression.Codec)
		if i > 0 {
			for _, t := range streams[i-1] {
				parts[i].Tables = append(parts[i].Tables, t.qualified())
			}
		}
		g.Go(func() error { return dumpPart(gctx, src, cfg, dir, &parts[i], args[i], progress) })
	}
	if err := g.Wait(); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("pg_dump interrupted, no backup was kept: %w", ctx.Err())
		}
		return err
	}
	if err := syncDir(dir); err != nil {
		return err
	}
	if len(parts) == 1 {
		m.DumpFile, m.DumpSize, m.RawSize, m.SHA256 = parts[0].File, parts[0].Size, parts[0].RawSize, parts[0].SHA256
		return nil
	}
	m.FormatVersion, m.Streams, m.DumpFile = FormatVersionStreams, parts, parts[0].File
	for _, p := range parts {
		m.DumpSize += p.Size
		m.RawSize += p.RawSize
	}
	return nil
}

// dumpPart streams pg_dump -> counter -> encoder -> (file, sha256) into a
// temporary name, renamed only after pg_dump exited 0.
func dumpPart(ctx context.Context, src Target, cfg *config, dir string, part *DumpPart, args []string, progress *sharedProgress) (err error) {
	final := filepath.Join(dir, part.File)
	tmp := final + partialExt
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = os.Remove(tmp)
		}
	}()

	hash := sha256.New()
	buf := bufio.NewWriterSize(withEarlyWriteback(f), 1<<20)
	enc, err := newEncoder(io.MultiWriter(buf, hash), cfg.compression)
	if err != nil {
		return err
	}

	stderr := newTail(8192)
	// An OS pipe of 1 MiB between pg_dump and us: exec's own pipe holds 64 KiB, and pg_dump
	// waited on it.
	pr, pw, err := os.Pipe()
	if err != nil {
		return err
	}
	raw := &progressReader{r: coalesce(pr, widenPipe(pw)), shared: progress}
	copied := make(chan error, 1)
	go func() {
		// The encoder reads pg_dump's output straight into its blocks (its ReadFrom): one copy
		// of the whole dump less than through our buffer.
		_, err := io.CopyBuffer(enc, raw, make([]byte, 1<<20))
		_ = pr.Close() // after a failed write, pg_dump's next write fails instead of blocking
		copied <- err
	}()
	runErr := src.Run(ctx, "pg_dump", args, Stdio{Stdout: pw, Stderr: stderr})
	_ = pw.Close()
	copyErr := <-copied
	closeErr := enc.Close()
	if copyErr != nil {
		return fmt.Errorf("writing the dump failed, no backup was kept: %w", copyErr)
	}
	if runErr != nil {
		return fmt.Errorf("pg_dump failed, no backup was kept: %w", withStderr(runErr, stderr))
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("pg_dump interrupted, no backup was kept: %w", err)
	}
	if closeErr != nil {
		return fmt.Errorf("compressing dump: %w", closeErr)
	}
	if raw.n == 0 {
		return fmt.Errorf("pg_dump wrote nothing: %s", stderr.String())
	}
	if err := buf.Flush(); err != nil {
		return fmt.Errorf("writing %s: %w", tmp, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("syncing %s: %w", tmp, err)
	}
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("reading the size of %s: %w", tmp, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("closing %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, final); err != nil {
		return err
	}
	part.Size, part.RawSize = st.Size(), raw.n
	part.SHA256 = hex.EncodeToString(hash.Sum(nil))
	return nil
}

type rowCounts struct {
	rows map[string]int64
	err  error
}

// progressReader counts the bytes read through it, and adds them to the backup's progress.
type progressReader struct {
	r      io.Reader
	n      int64
	shared *sharedProgress
}

func (c *progressReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	if n > 0 {
		c.shared.add(int64(n))
	}
	return n, err
}

// sharedProgress sums the bytes of every stream and reports the total, one call at a time
// (callers' callbacks need not be safe for concurrent use).
type sharedProgress struct {
	mu     sync.Mutex
	n      int64
	report func(int64)
}

func (s *sharedProgress) add(n int64) {
	if s.report == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n += n
	s.report(s.n)
}
