package backup

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Verify failures, to test with errors.Is.
var (
	// ErrIncomplete: no manifest or no dump file (the backup never finished).
	ErrIncomplete = errors.New("backup incomplete")
	// ErrTruncated: the dump file's size differs from the manifest's.
	ErrTruncated = errors.New("dump truncated")
	// ErrChecksum: the dump file's sha256 differs from the manifest's.
	ErrChecksum = errors.New("dump checksum mismatch")
	// ErrUnreadable: the dump cannot be decompressed or read by pg_restore.
	ErrUnreadable = errors.New("dump unreadable")
)

const fixHint = "this backup cannot be restored: use another backup (polyaxon-deploy backup list) or take a new one (polyaxon-deploy backup)"

// Report is what Verify found.
type Report struct {
	Manifest *Manifest
	// Entries is the number of entries in the archive's table of contents.
	Entries int
	// Tables are the tables ("schema.name") the archive creates.
	Tables []string
	// TableData is the number of TABLE DATA entries.
	TableData int
	// DumpedBy is the pg_dump version that wrote the archive.
	DumpedBy string
	// Full is true when every data block was read (WithFullCheck).
	Full bool
	// tool is the pg_restore that read the dump (here, else on the target when the one here is
	// missing or too old): the one to turn it into SQL.
	tool toolRunner
}

// Verify checks a backup directory: the manifest is complete, the dump's
// size and sha256 match it, the stream decompresses (zstd's own checksums
// included) and pg_restore --list reads its table of contents. With
// WithFullCheck it also reads every data block. pg_restore runs on this
// machine; when it is missing or older than the dump's pg_dump and
// WithVerifyTarget is given, it runs on that target instead. Options:
// WithToolsDir, WithVerifyTarget, WithFullCheck, WithLogger.
func Verify(ctx context.Context, dir string, opts ...VerifyOption) (*Report, error) {
	return verify(ctx, dir, newConfig(opts))
}

func verify(ctx context.Context, dir string, cfg *config) (*Report, error) {
	m, err := ReadManifest(dir)
	if err != nil {
		return nil, fmt.Errorf("verify: %w: %w", ErrIncomplete, err)
	}
	if m.Encryption != nil {
		o, err := open(ctx, dir, m, cfg.identities)
		if err != nil {
			return nil, fmt.Errorf("verify: %w", err)
		}
		defer o.Close()
		rep, err := verify(ctx, o.dir, cfg)
		if rep != nil {
			rep.Manifest = m // the backup as it is, sealed, not the private copy verified
		}
		return rep, err
	}
	dumps, err := checkDumpFiles(dir, m)
	if err != nil {
		return nil, fmt.Errorf("verify %w", err)
	}
	run, where, err := restoreRunner(cfg)
	if err != nil {
		return nil, fmt.Errorf("verify %s: %w", dir, err)
	}

	rep := &Report{Manifest: m}
	for i, p := range m.Parts() {
		listing, sum, streamErr, toolErr := streamToTool(ctx, dumps[i], m.Compression.Codec, run, []string{"--list"}, true)
		if toolErr != nil && cfg.verifyTarget != nil && where == "local" && isTooOld(toolErr) {
			cfg.logger.Info("local pg_restore too old for the dump, verifying on the target", "target", cfg.verifyTarget.String())
			run, where = targetRunner(cfg.verifyTarget), cfg.verifyTarget.String()
			listing, sum, streamErr, toolErr = streamToTool(ctx, dumps[i], m.Compression.Codec, run, []string{"--list"}, true)
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("verify %s: %w", dir, ctx.Err())
		}
		if sum != "" {
			if err := checksumError(p, sum, nil, ""); err != nil {
				return nil, fmt.Errorf("verify %s: %w", dir, err)
			}
		}
		if streamErr != nil {
			return nil, fmt.Errorf("verify %s: %w: decompressing %s (%s): %w; %s", dir, ErrUnreadable, p.File, m.Compression.Codec, streamErr, fixHint)
		}
		if toolErr != nil {
			return nil, fmt.Errorf("verify %s: %w: pg_restore --list (%s) cannot read %s: %w%s", dir, ErrUnreadable, where, p.File, toolErr, versionHint(toolErr, m))
		}
		entries := rep.Entries
		parseListing(listing, rep)
		if rep.Entries == entries {
			return nil, fmt.Errorf("verify %s: %w: pg_restore --list found no entries in %s; %s", dir, ErrUnreadable, p.File, fixHint)
		}
	}
	if cfg.full {
		for i, p := range m.Parts() {
			_, _, streamErr, toolErr := streamToTool(ctx, dumps[i], m.Compression.Codec, run, []string{"--file=" + os.DevNull}, false)
			if err := errors.Join(streamErr, toolErr); err != nil {
				return nil, fmt.Errorf("verify %s: %w: pg_restore (%s) cannot read every data block of %s: %w%s", dir, ErrUnreadable, where, p.File, err, versionHint(err, m))
			}
		}
		rep.Full = true
	}
	rep.tool = run
	cfg.logger.Info("backup verified", "dir", dir, "layout", m.Layout(), "entries", rep.Entries, "tables", len(rep.Tables), "full", rep.Full, "pg_restore", where)
	return rep, nil
}

// Checksum checks a backup's dump against its manifest without any PostgreSQL tool: each file
// present, of the recorded size, with the recorded sha256 (every file is read). Errors wrap
// ErrIncomplete, ErrTruncated or ErrChecksum.
func Checksum(ctx context.Context, dir string) error {
	m, err := ReadManifest(dir)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrIncomplete, err)
	}
	if m.Encryption != nil {
		return checkSealed(ctx, dir, m)
	}
	dumps, err := checkDumpFiles(dir, m)
	if err != nil {
		return err
	}
	for i, p := range m.Parts() {
		if err := checksumFile(ctx, dumps[i], p); err != nil {
			return fmt.Errorf("%s: %w", dir, err)
		}
	}
	return nil
}

func checksumFile(ctx context.Context, path string, p DumpPart) error {
	f, err := openDump(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return CheckStored(ctx, f, p)
}

// ctxReader stops a long read when ctx is cancelled.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// checkDumpFiles returns the paths of the dump's files once each exists with the size the
// manifest recorded.
func checkDumpFiles(dir string, m *Manifest) ([]string, error) {
	var paths []string
	for _, p := range m.Parts() {
		path := filepath.Join(dir, p.File)
		st, err := os.Stat(path)
		if err != nil {
			return nil, fmt.Errorf("%s: %w: dump file missing: %w; %s", dir, ErrIncomplete, err, fixHint)
		}
		if st.Size() != p.Size {
			what := "is truncated"
			if st.Size() > p.Size {
				what = "has grown"
			}
			return nil, fmt.Errorf("%s: %w: %s is %d bytes but the manifest recorded %d: the file %s since the backup; %s",
				dir, ErrTruncated, p.File, st.Size(), p.Size, what, fixHint)
		}
		paths = append(paths, path)
	}
	return paths, nil
}

func isTooOld(err error) bool { return strings.Contains(err.Error(), "unsupported version") }

func versionHint(err error, m *Manifest) string {
	if isTooOld(err) {
		return fmt.Sprintf("; the pg_restore used is older than the pg_dump that wrote this dump (server %s): install a newer PostgreSQL client (apt-get install -y postgresql-client) or pass its directory", m.ServerVersion)
	}
	return "; " + fixHint
}

// toolRunner runs pg_restore with args, stdin and stdout.
type toolRunner func(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error

// restoreRunner picks the local pg_restore, else the verify target's.
func restoreRunner(cfg *config) (toolRunner, string, error) {
	path, err := findTool(cfg.toolsDir, "pg_restore")
	if err == nil {
		return localRunner(path), "local", nil
	}
	if cfg.verifyTarget != nil {
		return targetRunner(cfg.verifyTarget), cfg.verifyTarget.String(), nil
	}
	return nil, "", err
}

func localRunner(path string) toolRunner {
	return func(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
		cmd := exec.CommandContext(ctx, path, args...)
		cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
		return cmd.Run()
	}
}

func targetRunner(t Target) toolRunner {
	return func(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
		return t.Run(ctx, "pg_restore", args, Stdio{Stdin: stdin, Stdout: stdout, Stderr: stderr})
	}
}

var errToolDone = errors.New("pg_restore stopped reading")

// openDump opens a dump file for reading (tests count what is read through it).
var openDump = func(path string) (io.ReadCloser, error) { return os.Open(path) }

// streamToTool decodes the dump file into the tool's stdin. Reading
// continues to the end even when the tool stops early (pg_restore --list
// reads only the table of contents), so the sha256 (hex, of the file) and
// the codec's own checksums always cover the whole file. wantOut keeps the
// tool's stdout.
func streamToTool(ctx context.Context, dump, codec string, run toolRunner, args []string, wantOut bool) (out []byte, sum string, streamErr, toolErr error) {
	in, err := openDumpReader(ctx, dump, codec, false)
	if err != nil {
		return nil, "", err, nil
	}
	defer in.Close()

	var stdout bytes.Buffer
	var outW io.Writer = io.Discard
	if wantOut {
		outW = &stdout
	}
	stderr := newTail(4096)
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := run(ctx, args, pr, outW, stderr)
		_ = pr.CloseWithError(errToolDone) // unblock our writes if it stopped early
		done <- err
	}()
	buf := make([]byte, 256<<10)
	open := true
	for {
		n, rerr := in.Read(buf)
		if n > 0 && open {
			if _, werr := pw.Write(buf[:n]); werr != nil {
				open = false // the tool stopped reading; keep decoding to check the rest
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			streamErr = rerr
			break
		}
	}
	if streamErr != nil {
		_ = pw.CloseWithError(streamErr)
	} else {
		_ = pw.Close()
	}
	if werr := <-done; werr != nil {
		toolErr = withStderr(fmt.Errorf("pg_restore %s: %w", strings.Join(args, " "), werr), stderr)
	}
	// The decoder may have stopped at an error: the rest of the file is hashed too.
	sum, err = in.sum()
	if err != nil {
		return stdout.Bytes(), "", errors.Join(streamErr, err), toolErr
	}
	return stdout.Bytes(), sum, streamErr, toolErr
}

// parseListing reads pg_restore --list output.
func parseListing(out []byte, rep *Report) {
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, ";") {
			if _, v, ok := strings.Cut(line, "Dumped by pg_dump version:"); ok {
				rep.DumpedBy = strings.TrimSpace(v)
			}
			continue
		}
		if strings.TrimSpace(line) == "" {
			continue
		}
		rep.Entries++
		// "<id>; <catalog> <oid> <TYPE...> <schema> <name> <owner>"
		f := strings.Fields(line)
		if len(f) >= 6 && f[3] == "TABLE" {
			if f[4] == "DATA" {
				rep.TableData++
			} else {
				rep.Tables = append(rep.Tables, f[4]+"."+f[5])
			}
		}
	}
	sort.Strings(rep.Tables)
}

// findTool finds a local PostgreSQL client tool: in dir if given, else on
// $PATH, else the newest /usr/lib/postgresql/<ver>/bin.
func findTool(dir, name string) (string, error) {
	if dir != "" {
		p := filepath.Join(dir, name)
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%s not found in %s: %w", name, dir, err)
		}
		return p, nil
	}
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/" + name)
	if len(matches) > 0 {
		sort.Slice(matches, func(i, j int) bool { return pgDirVersion(matches[i]) > pgDirVersion(matches[j]) })
		return matches[0], nil
	}
	return "", fmt.Errorf("%s not found on PATH: install the PostgreSQL client (apt-get install -y postgresql-client)", name)
}

func pgDirVersion(p string) float64 {
	v, _ := strconv.ParseFloat(filepath.Base(filepath.Dir(filepath.Dir(p))), 64)
	return v
}
