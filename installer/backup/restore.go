package backup

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// RestoreReport is what Restore did.
type RestoreReport struct {
	// Verify is what was checked before the restore: the table of contents (or, with
	// WithFullCheck, a full Verify).
	Verify *Report
	// Tables are the dump's tables found in the database after the restore.
	Tables []string
	// Rows are those tables' row counts after the restore.
	Rows     map[string]int64
	Duration time.Duration
	// Way is how the dump was restored: RestoredBySwap or RestoredInOneTransaction.
	Way string
	// Steps are the restore's steps in order with their durations (scaling the writers back
	// up, after the report, is not among them).
	Steps []StepTime
}

// The ways a dump is restored (RestoreReport.Way).
const (
	RestoredBySwap           = "swap"
	RestoredInOneTransaction = "one transaction"
)

// StepTime is how long one step of a restore took.
type StepTime struct {
	Step     string        `json:"step"`
	Duration time.Duration `json:"duration"`
}

// stepClock records consecutive steps: each ends where the next begins.
type stepClock struct {
	last  time.Time
	steps []StepTime
}

func (c *stepClock) done(step string) {
	now := time.Now()
	c.steps = append(c.steps, StepTime{Step: step, Duration: now.Sub(c.last)})
	c.last = now
}

// ErrOtherRelease: the backup was taken from another release or namespace (see WithTargetRelease).
var ErrOtherRelease = errors.New("backup of another release")

// Restore replaces the target database's contents with the backup in dir.
//
// Before anything changes it checks the manifest, the dump's size, that the backup belongs to
// the target release (WithTargetRelease; WithForce overrides), that it was not taken from a
// newer app version than the running one (WithRunningAppVersion; WithForce overrides), and
// reads the dump's table of contents. Then one of two ways:
//
//   - By swap, for a local target whose role may create and rename its database (see
//     swap.go): the dump is decoded into a spool file and its sha256 checked, the writers are
//     scaled down (WithScaler), pg_restore -j (WithJobs) restores it into a new database, the
//     new database's tables are checked, and only then does it take the target's name; the old
//     database is dropped.
//   - In one transaction, otherwise: the writers are scaled down and the dump is read once,
//     hashed as it is decompressed into pg_restore --clean --if-exists --single-transaction
//     --no-owner. The last bytes are held back until the sha256 and the codec's checksums
//     match the manifest, so a damaged dump leaves pg_restore waiting for the end of its one
//     transaction, which is then rolled back: nothing is committed. Every table of the dump
//     must exist afterwards.
//
// Either way, a failure leaves the target database as it was, and the writers are scaled back
// (also on failure). WithFullCheck verifies every data block first (a second read). Options:
// WithTargetRelease, WithScaler, WithRunningAppVersion, WithForce, WithRestoreArgs, WithJobs,
// WithToolsDir, WithFullCheck, WithLogger.
//
// Confirmation is the caller's business: Restore replaces the database.
func Restore(ctx context.Context, target Target, dir string, opts ...RestoreOption) (_ *RestoreReport, err error) {
	cfg := newConfig(opts)
	log := cfg.logger
	start := time.Now()
	clock := &stepClock{last: start}
	name := dir
	m, err := ReadManifest(dir)
	if err != nil {
		return nil, fmt.Errorf("restore: %w: %w", ErrIncomplete, err)
	}
	if m.Encryption != nil {
		// Opened (every sealed file checked and decrypted) before anything changes.
		o, err := open(ctx, dir, m, cfg.identities)
		if err != nil {
			return nil, fmt.Errorf("restore: %w", err)
		}
		defer o.Close()
		dir = o.dir // read from here; messages keep naming the backup (name)
		if m, err = ReadManifest(dir); err != nil {
			return nil, fmt.Errorf("restore: %w", err)
		}
	}
	dumps, err := checkDumpFiles(dir, m)
	if err != nil {
		return nil, fmt.Errorf("restore: %w", err)
	}
	parts := m.Parts()
	if err := CheckOrigin(m, cfg.targetRelease.Name, cfg.targetRelease.Namespace); err != nil && !cfg.force {
		return nil, fmt.Errorf("restore %s: %w", name, err)
	}
	if err := CheckAppVersion(m.AppVersion, cfg.runningApp); err != nil && !cfg.force {
		return nil, fmt.Errorf("restore %s: %w", name, err)
	}
	var rep *Report
	if cfg.full || selectsPart(cfg.restoreArgs) {
		// A partial restore may stop reading before the end: verify the whole dump first.
		c := *cfg
		c.verifyTarget = target
		rep, err = verify(ctx, dir, &c)
	} else {
		rep, err = readTOC(ctx, dir, dumps, m, cfg, target)
	}
	if err != nil {
		return nil, fmt.Errorf("restore: %w", err)
	}
	clock.done("read the table of contents")

	// A restore by swap checks the whole dump while spooling it, before anything changes: a
	// damaged dump does not even scale the writers down.
	sw, whyNot := planSwap(ctx, target, cfg)
	var spoolFile string
	if sw != nil {
		log.Info("checking the dump and spooling it for a parallel restore", "dir", name)
		// A dump in streams spools only its first archive (the schema and the small tables):
		// the others stream straight into pg_restore.
		spoolFile, err = spool(ctx, dumps[0], parts[0], m.Compression.Codec)
		switch {
		case errors.Is(err, errSpoolSpace):
			sw, whyNot = nil, err.Error()
		case err != nil:
			return nil, fmt.Errorf("restore %s: %w", name, err)
		default:
			defer os.Remove(spoolFile)
			clock.done("decode the dump and check its sha256")
		}
	}
	if sw == nil {
		log.Info("restoring in one transaction", "why", whyNot)
	}

	if cfg.scaler != nil {
		log.Info("scaling database writers down")
		scaleBack, err := cfg.scaler.ScaleDown(ctx)
		if err != nil {
			if scaleBack != nil {
				err = errors.Join(err, scaleBack(context.WithoutCancel(ctx)))
			}
			return nil, fmt.Errorf("restore %s: scaling down: %w", name, err)
		}
		defer func() {
			bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Minute)
			defer cancel()
			log.Info("scaling database writers back up")
			if serr := scaleBack(bctx); serr != nil {
				err = errors.Join(err, fmt.Errorf("restore %s: scaling back up: %w", name, serr))
			}
		}()
		clock.done("scale the writers down")
	}

	log.Info("restoring database", "dir", name, "target", target.String(), "tables", len(rep.Tables))
	// check counts the rows of the restored database (the new one, by swap), which must have
	// every table of the dump.
	var rows map[string]int64
	check := func(ctx context.Context, known map[string]int64) error {
		log.Info("counting the restored tables' rows", "tables", len(rep.Tables), "known from their loads", len(known))
		if sw == nil {
			counted, cerr := checkRestored(ctx, target, rep.Tables, 1, nil)
			rows = counted
			return cerr
		}
		counted, cerr := checkRestored(ctx, sw.restored(), rep.Tables, sw.jobs, known)
		if cerr != nil {
			return fmt.Errorf("%w; the restored copy is dropped, %s is unchanged", cerr, target)
		}
		rows = counted
		return nil
	}
	checked := false
	if sw != nil {
		defer func() {
			if err != nil {
				err = errors.Join(err, sw.drop(ctx))
			}
		}()
		if len(parts) == 1 {
			err = sw.restore(ctx, spoolFile, cfg.restoreArgs)
		} else {
			// The rows are counted beside the last pass, which adds none.
			err = sw.restoreStreams(ctx, spoolFile, dumps, m, cfg.restoreArgs, clock, check)
			checked = err == nil
		}
		if err != nil {
			return nil, fmt.Errorf("restore %s into %s: %w", name, target, err)
		}
		if len(parts) == 1 {
			clock.done(fmt.Sprintf("pg_restore --jobs %d into a new database", sw.jobs))
		}
	} else if len(parts) == 1 {
		args := []string{"--clean", "--if-exists", "--single-transaction", "--exit-on-error", "--no-owner", "--no-password"}
		args = append(args, cfg.restoreArgs...)
		if err := streamRestore(ctx, target, dumps[0], parts[0], m.Compression.Codec, args); err != nil {
			return nil, fmt.Errorf("restore %s into %s: %w", name, target, err)
		}
		clock.done("pg_restore in one transaction, checking the sha256")
	} else {
		if err := restoreInOneSession(ctx, target, rep.tool, dumps, m, rep.Tables, cfg.restoreArgs); err != nil {
			return nil, fmt.Errorf("restore %s into %s: %w", name, target, err)
		}
		clock.done(fmt.Sprintf("%d streams' SQL in one transaction, checking the sha256s", len(parts)))
	}

	if !checked {
		if err := check(ctx, nil); err != nil {
			return nil, fmt.Errorf("restore %s: %w", name, err)
		}
		clock.done("count the rows of every table")
	}
	way := RestoredInOneTransaction
	if sw != nil {
		way = RestoredBySwap
		log.Info("swapping the restored database in", "database", sw.scratch)
		if err := sw.swap(ctx); err != nil {
			return nil, fmt.Errorf("restore %s: %w", name, err)
		}
		clock.done("wait for the sessions to end, swap the databases")
		sw.dropRetired(ctx)
		clock.done("drop the replaced database")
	}
	out := &RestoreReport{Verify: rep, Tables: rep.Tables, Rows: rows, Duration: time.Since(start), Way: way, Steps: clock.steps}
	log.Info("database restored", "dir", name, "tables", len(out.Tables), "seconds", out.Duration.Seconds())
	return out, nil
}

// checkRestored counts the rows of the restored database's tables; every table of the dump
// must be among them. One psql run finds the tables, up to sessions count their rows, a table
// per statement; those of known are not counted again.
func checkRestored(ctx context.Context, t Target, tables []string, sessions int, known map[string]int64) (map[string]int64, error) {
	counts, err := countRowsEach(ctx, t, sessions, known)
	if err != nil {
		return nil, fmt.Errorf("checking the result: %w", err)
	}
	var missing []string
	rows := map[string]int64{}
	for _, table := range tables {
		n, ok := counts[table]
		if !ok {
			missing = append(missing, table)
		}
		rows[table] = n
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("check failed: tables of the dump missing after restore: %s", strings.Join(missing, ", "))
	}
	return rows, nil
}

// holdBack is how much of the decompressed dump pg_restore gets only once the whole file
// checked out. pg_restore reads an archive to its last byte (the end marker of the last data
// block) before it commits, so any tail will do; this one is a comfortable margin.
const holdBack = 64 << 10

const nothingCommitted = "the restore runs in one transaction and was rolled back: nothing was committed, the database is unchanged"

// streamRestore feeds the dump to pg_restore in one pass, hashing what it reads, and lets
// pg_restore see the end of the archive only when the sha256 matches the manifest.
func streamRestore(ctx context.Context, target Target, dump string, p DumpPart, codec string, args []string) error {
	in, err := openDumpReader(ctx, dump, codec, true)
	if err != nil {
		return err
	}
	defer in.Close()

	pw, stderr, done, err := startOnPipe(ctx, func(ctx context.Context, stdin io.Reader, stderr io.Writer) error {
		return target.Run(ctx, "pg_restore", args, Stdio{Stdin: stdin, Stderr: stderr})
	})
	if err != nil {
		return err
	}
	// abort ends pg_restore's input before the end of the archive: it fails, and its one
	// transaction is rolled back.
	abort := func() { _ = pw.Close(); <-done }
	out := &writeTracker{w: pw}
	hold := &holdback{w: out, n: holdBack}
	_, copyErr := io.CopyBuffer(hold, onlyReader{in}, make([]byte, 256<<10))

	toolFailed := func(err error) error {
		return fmt.Errorf("pg_restore failed; %s: %w", nothingCommitted, withStderr(err, stderr))
	}
	// A dump that differs from its manifest is reported as altered, whatever tripped first on
	// the damage.
	switch {
	case out.err != nil:
		// pg_restore stopped before the end of the archive: an error of its own.
		_ = pw.Close()
		err := <-done
		if ctx.Err() != nil {
			return fmt.Errorf("interrupted; %s: %w", nothingCommitted, ctx.Err())
		}
		if err == nil {
			return fmt.Errorf("pg_restore finished before reading the whole dump, which was not verified yet: check the database")
		}
		if aerr := in.altered(p, withStderr(err, stderr), nothingCommitted); aerr != nil {
			return aerr
		}
		return toolFailed(err)
	case copyErr != nil:
		abort()
		if ctx.Err() != nil {
			return fmt.Errorf("interrupted; %s: %w", nothingCommitted, ctx.Err())
		}
		if aerr := in.altered(p, fmt.Errorf("%s: %w", codec, copyErr), nothingCommitted); aerr != nil {
			return aerr
		}
		return fmt.Errorf("%w: decompressing %s (%s): %w; %s; %s", ErrUnreadable, p.File, codec, copyErr, nothingCommitted, fixHint)
	}
	// The decoder is at the end of its stream: the rest of the file is hashed before
	// pg_restore sees the end of the archive.
	if err := in.verified(p, nothingCommitted); err != nil {
		abort()
		return err
	}
	_ = hold.release() // a failure here is pg_restore's, reported below
	_ = pw.Close()
	if err := <-done; err != nil {
		return toolFailed(err)
	}
	return nil
}

// writeTracker remembers the first write error (pg_restore gone).
type writeTracker struct {
	w   io.Writer
	err error
}

func (t *writeTracker) Write(p []byte) (int, error) {
	if t.err != nil {
		return 0, t.err
	}
	n, err := t.w.Write(p)
	if err != nil {
		t.err = err
	}
	return n, err
}

// onlyReader hides a decoder's WriteTo, so io.CopyBuffer goes through our buffer and writer.
type onlyReader struct{ io.Reader }

// holdback writes everything to w except the last n bytes, which release writes.
type holdback struct {
	w   io.Writer
	n   int
	buf []byte
}

func (h *holdback) Write(p []byte) (int, error) {
	if len(p) < h.n {
		h.buf = append(h.buf, p...)
		if over := len(h.buf) - h.n; over > 0 {
			if _, err := h.w.Write(h.buf[:over]); err != nil {
				return 0, err
			}
			h.buf = h.buf[:copy(h.buf, h.buf[over:])]
		}
		return len(p), nil
	}
	// A chunk longer than the tail: the held bytes and all but its tail go out as they are,
	// only its tail is copied.
	if len(h.buf) > 0 {
		if _, err := h.w.Write(h.buf); err != nil {
			return 0, err
		}
	}
	if _, err := h.w.Write(p[:len(p)-h.n]); err != nil {
		return 0, err
	}
	h.buf = append(h.buf[:0], p[len(p)-h.n:]...)
	return len(p), nil
}

func (h *holdback) release() error {
	_, err := h.w.Write(h.buf)
	h.buf = nil
	return err
}

// readTOC reads the table of contents of each of the dump's archives with pg_restore --list on
// its head (pg_restore stops after it), with the pg_restore Verify would use: cheap, and before
// anything changes. When it fails, every file is hashed so that an altered dump is reported as
// such.
func readTOC(ctx context.Context, dir string, dumps []string, m *Manifest, cfg *config, target Target) (*Report, error) {
	c := *cfg
	c.verifyTarget = target
	run, where, err := restoreRunner(&c)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	rep := &Report{Manifest: m}
	for i, p := range m.Parts() {
		listing, streamErr, toolErr := streamHead(ctx, dumps[i], m.Compression.Codec, run, []string{"--list"})
		if toolErr != nil && where == "local" && isTooOld(toolErr) {
			cfg.logger.Info("local pg_restore too old for the dump, reading its table of contents on the target", "target", target.String())
			run, where = targetRunner(target), target.String()
			listing, streamErr, toolErr = streamHead(ctx, dumps[i], m.Compression.Codec, run, []string{"--list"})
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%s: %w", dir, ctx.Err())
		}
		if streamErr != nil || toolErr != nil {
			if err := Checksum(ctx, dir); errors.Is(err, ErrChecksum) {
				return nil, fmt.Errorf("%w; nothing was changed", err)
			}
			if streamErr != nil {
				return nil, fmt.Errorf("%s: %w: decompressing %s (%s): %w; %s", dir, ErrUnreadable, p.File, m.Compression.Codec, streamErr, fixHint)
			}
			return nil, fmt.Errorf("%s: %w: pg_restore --list (%s) cannot read %s: %w%s", dir, ErrUnreadable, where, p.File, toolErr, versionHint(toolErr, m))
		}
		entries := rep.Entries
		parseListing(listing, rep)
		if rep.Entries == entries {
			return nil, fmt.Errorf("%s: %w: pg_restore --list found no entries in %s; %s", dir, ErrUnreadable, p.File, fixHint)
		}
	}
	rep.tool = run
	return rep, nil
}

// streamHead decodes the dump into the tool until the tool stops reading.
func streamHead(ctx context.Context, dump, codec string, run toolRunner, args []string) (out []byte, streamErr, toolErr error) {
	f, err := openDump(dump)
	if err != nil {
		return nil, err, nil
	}
	defer f.Close()
	dec, err := newSyncDecoder(bufio.NewReaderSize(f, 64<<10), codec)
	if err != nil {
		return nil, err, nil
	}
	defer dec.Close()
	var stdout bytes.Buffer
	stderr := newTail(4096)
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := run(ctx, args, pr, &stdout, stderr)
		_ = pr.CloseWithError(errToolDone)
		done <- err
	}()
	_, copyErr := io.CopyBuffer(pw, onlyReader{dec}, make([]byte, 32<<10))
	if copyErr != nil && !errors.Is(copyErr, errToolDone) {
		streamErr = copyErr
		_ = pw.CloseWithError(copyErr)
	} else {
		_ = pw.Close()
	}
	if err := <-done; err != nil {
		toolErr = withStderr(fmt.Errorf("pg_restore %s: %w", strings.Join(args, " "), err), stderr)
	}
	return stdout.Bytes(), streamErr, toolErr
}

// selectsPart reports pg_restore flags that restore only part of an archive: pg_restore may
// then stop reading before the end, so the end cannot be held back until the hash is known.
func selectsPart(args []string) bool {
	for _, a := range args {
		name, _, _ := strings.Cut(a, "=")
		switch name {
		case "-a", "--data-only", "-s", "--schema-only", "-n", "--schema", "-N", "--exclude-schema", "-t", "--table",
			"-T", "--trigger", "-I", "--index", "-P", "--function", "-L", "--use-list", "--section", "-l", "--list":
			return true
		}
		if len(a) > 2 && a[0] == '-' && a[1] != '-' && strings.ContainsAny(a[1:2], "asnNtTIPL") {
			return true
		}
	}
	return false
}
