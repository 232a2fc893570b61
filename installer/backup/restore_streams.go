package backup

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
)

// Restoring a dump taken in parallel streams (streams.go). The first archive holds the schema
// and the small tables' data, each other archive the data of its share of the large tables;
// pg_restore restores one archive per run, so a restore is the first archive's pre-data, then
// the data of every archive, then the first archive's post-data (indexes, constraints), in
// one of two ways:
//
//   - By swap (a local target): into the new database, the data of all archives at once, each
//     stream's archive read as it is decoded (no spool file but the first archive's, which
//     pg_restore --jobs needs for the indexes) and its tables' rows sent by our process's COPYs
//     in one transaction, written frozen (copyload.go, freeze.go), and
//     each stream's indexes built as soon as its data is in (postdata.go). Nothing touches the
//     target until every archive's sha256 matched and the tables were checked.
//   - In one transaction: a transaction is one server session, and pg_restore refuses --jobs
//     with --single-transaction, so the server's side cannot run in parallel there, whatever
//     the layout. pg_restore turns each archive into SQL (-f -), in restore order, into one
//     psql session that we open with BEGIN and end with COMMIT only once every archive's sha256
//     matched; any failure ends the session without it, and the server rolls everything back.
//     Where the restore can run in parallel, it is done by swap instead.

// pipeTool runs a tool that reads an archive from stdin (the caller's pg_restore).
type pipeTool func(ctx context.Context, stdin io.Reader, stderr io.Writer) error

// startOnPipe starts tool reading an OS pipe, not an io.Pipe: a local pg_restore reads it
// directly, without a copying goroutine in between. The pipe's read end is closed once the
// tool is gone, so a write to a tool that stopped early fails instead of blocking; done gets
// the tool's error, stderr the end of what it printed.
func startOnPipe(ctx context.Context, tool pipeTool) (pw *os.File, stderr *tailBuffer, done <-chan error, err error) {
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, nil, nil, err
	}
	_ = widenPipe(pw)
	stderr = newTail(8192)
	result := make(chan error, 1)
	go func() {
		err := tool(ctx, pr, stderr)
		_ = pr.Close()
		result <- err
	}()
	return pw, stderr, result, nil
}

// restorePart decodes one archive of the dump into tool and checks the file's sha256 once the
// tool is done with it. Neither way of restoring commits anything to the target before every
// archive checked out, so the tool may stop reading early (unlike streamRestore's). A failure
// is reported as an altered dump when the file's sha256 is not the manifest's, whatever tripped
// first; after says what state a failure leaves behind. A tool of our own process (inProcess)
// reads the decoded archive directly; another program, from an OS pipe.
func restorePart(ctx context.Context, path string, p DumpPart, codec string, tool pipeTool, inProcess bool, after string) error {
	in, err := openDumpReader(ctx, path, codec, true)
	if err != nil {
		return err
	}
	defer in.Close()
	var copyErr, toolErr error
	var stderr *tailBuffer
	if inProcess {
		stderr = newTail(8192)
		decoded := &readTracker{r: onlyReader{in}}
		toolErr = tool(ctx, decoded, stderr)
		copyErr = decoded.err
	} else {
		pw, tail, done, err := startOnPipe(ctx, tool)
		if err != nil {
			return err
		}
		stderr = tail
		out := &writeTracker{w: pw}
		_, copyErr = io.CopyBuffer(out, onlyReader{in}, make([]byte, 256<<10))
		_ = pw.Close()
		toolErr = <-done
		if out.err != nil {
			copyErr = nil // the tool stopped reading: its error says why
		}
	}
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("interrupted; %s: %w", after, ctx.Err())
	case copyErr != nil:
		if aerr := in.altered(p, fmt.Errorf("%s: %w", codec, copyErr), after); aerr != nil {
			return aerr
		}
		return fmt.Errorf("%w: decompressing %s (%s): %w; %s; %s", ErrUnreadable, p.File, codec, copyErr, after, fixHint)
	case toolErr != nil:
		if aerr := in.altered(p, withStderr(toolErr, stderr), after); aerr != nil {
			return aerr
		}
		return fmt.Errorf("restoring %s failed: %w; %s", p.File, withStderr(toolErr, stderr), after)
	}
	// pg_restore may stop once it has what its sections need (post-data needs only the table
	// of contents): the rest of the file is hashed all the same, before anything is committed.
	return in.verified(p, after)
}

// restoreStreams restores a dump in streams into a new database: the first archive's pre-data
// from the spool file, then its data and every other stream's at once, each stream's indexes
// and keys as soon as its data is in and each foreign key as soon as its tables' streams are
// complete (postdata.go), then the rest of post-data with --jobs,
// with check (restore's count of the rows) beside it: post-data adds no rows and drops no
// table, and the count's locks (ACCESS SHARE, one table after the other) never wait for
// anything that waits for them. The restored copy is left for the swap.
func (s *swapRestore) restoreStreams(ctx context.Context, spoolFile string, dumps []string, m *Manifest, args []string, clock *stepClock, check func(context.Context, map[string]int64) error) error {
	parts := m.Parts()
	plan, err := s.readPostDataPlan(ctx, spoolFile, parts)
	planned := err == nil
	if !planned {
		if ctx.Err() != nil {
			return fmt.Errorf("interrupted; %s: %w", nothingTouched, ctx.Err())
		}
		// Only slower: every index waits for the last stream, as pg_restore --jobs would.
		s.log.Warn("the dump's post-data could not be planned: every index and constraint is built at the end", "error", err)
		plan = &postDataPlan{early: make([][]int, len(parts))}
	}
	lists, err := os.MkdirTemp("", "polyaxon-deploy-restore-lists-*")
	if err != nil {
		return err
	}
	defer os.RemoveAll(lists)
	if err := s.create(ctx); err != nil {
		return err
	}
	early := 0
	for _, ids := range plan.early {
		early += len(ids)
	}
	s.log.Info("restoring the streams into a new database", "database", s.scratch, "streams", len(parts), "jobs", s.jobs,
		"indexes and keys built as their stream's data is in", early, "foreign keys built as their tables are in", len(plan.fks))
	scratch := s.target.onDatabase(s.scratch)
	unchanged := fmt.Sprintf("the new database %s is dropped, %s is unchanged", s.scratch, s.target.conn.Database)
	base := append([]string{"--exit-on-error", "--no-owner", "--no-password"}, args...)
	fromSpool := func(ctx context.Context, extra ...string) error {
		stderr := newTail(8192)
		if err := scratch.Run(ctx, "pg_restore", append(append(slices.Clone(base), extra...), spoolFile), Stdio{Stderr: stderr}); err != nil {
			return fmt.Errorf("pg_restore %s into the new database failed: %w; %s", strings.Join(extra, " "), withStderr(err, stderr), unchanged)
		}
		return nil
	}
	// postData builds the entries ids of the archive's post-data, listed in a file named name;
	// the last pass of an unplanned dump builds all of post-data.
	postData := func(ctx context.Context, name string, ids []int) error {
		if !planned && name == restList {
			return fromSpool(ctx, "--section=post-data", "--jobs="+strconv.Itoa(s.jobs))
		}
		if len(ids) == 0 {
			return nil
		}
		list, err := writeList(lists, name, ids)
		if err != nil {
			return err
		}
		return fromSpool(ctx, "--section=post-data", "--use-list="+list, "--jobs="+strconv.Itoa(s.jobs))
	}
	if err := fromSpool(ctx, "--section=pre-data"); err != nil {
		return err
	}
	clock.done("pg_restore the schema (pre-data) into a new database")
	tables, err := frozenTables(ctx, scratch)
	if err != nil {
		return fmt.Errorf("%w; %s", err, unchanged)
	}

	// A stream is complete once its data is in and its indexes and keys are built; the
	// foreign keys that wait only for complete streams are then built, one pass at a time
	// (buildForeignKeys, postdata.go).
	complete := make(chan int, len(parts))
	began := time.Now()
	// Once every stream's data is in, a checkpoint writes it out beside the rest (flushEarly).
	flushCtx, stopFlush := context.WithCancel(ctx)
	var dataIn atomic.Int32
	var flushing sync.WaitGroup
	defer func() { stopFlush(); flushing.Wait() }() // a failed restore cancels it: psql is stopped
	dataRestored := func(stream int) {
		s.log.Info("stream's data restored", "stream", stream, "tables", parts[stream].Tables, "after", time.Since(began))
		if int(dataIn.Add(1)) == len(parts) {
			flushing.Go(func() { s.flushEarly(flushCtx, began) })
		}
	}
	// The rows of the tables loaded by COPY, as the server counted them: check does not count
	// them again.
	var loaded loadedRows
	// restoreStream restores stream i's data, then builds its indexes and keys.
	restoreStream := func(ctx context.Context, i int) error {
		if i == 0 {
			if err := fromSpool(ctx, "--section=data"); err != nil {
				return err
			}
		} else {
			if err := s.loadStream(ctx, scratch, base, dumps[i], parts[i], m.Compression.Codec, len(args) == 0, tables, &loaded, unchanged); err != nil {
				return err
			}
		}
		dataRestored(i)
		if err := postData(ctx, fmt.Sprintf("stream-%d.list", i), plan.early[i]); err != nil {
			return err
		}
		s.log.Info("stream's indexes and keys built", "stream", i, "after", time.Since(began))
		return nil
	}
	// Every stream at once. On 2 cores, 2 at a time (the largest first, as pg_restore --jobs
	// takes them) left a core idle while a stream built its indexes: 7.1–7.3 s against
	// 6.9 s for 1 GiB, though the sessions beyond the cores wait on each other's WAL writes
	// (LWLock:WALWrite, sampled by e2e/bench/backup).
	g, gctx := errgroup.WithContext(ctx)
	for i := range parts {
		g.Go(func() error {
			if err := restoreStream(gctx, i); err != nil {
				return err
			}
			complete <- i
			return nil
		})
	}
	g.Go(func() error {
		done, taken := map[int]bool{}, map[int]bool{}
		for pass := 1; len(done) < len(parts); pass++ {
			select {
			case i := <-complete:
				done[i] = true
			case <-gctx.Done():
				return gctx.Err()
			}
			for more := true; more; {
				select {
				case i := <-complete:
					done[i] = true
				default:
					more = false
				}
			}
			ready := plan.ready(done, taken)
			if err := s.buildForeignKeys(gctx, scratch, plan, ready, func(ctx context.Context, ids []int) error {
				return postData(ctx, fmt.Sprintf("fk-%d.list", pass), ids)
			}); err != nil {
				return fmt.Errorf("%w; %s", err, unchanged)
			}
			if len(ready) > 0 {
				s.log.Info("foreign keys built", "keys", len(ready), "after", time.Since(began))
			}
		}
		return nil
	})
	if err := g.Wait(); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("interrupted; %s: %w", unchanged, ctx.Err())
		}
		return err
	}
	clock.done(fmt.Sprintf("pg_restore the data of %d streams at once, checking their sha256s; each stream's indexes and keys (%d) once its data is in, the foreign keys (%d) once their tables' are, validated %d at a time", len(parts), early, len(plan.fks), s.jobs))
	g, gctx = errgroup.WithContext(ctx)
	g.Go(func() error { return postData(gctx, restList, plan.rest) })
	g.Go(func() error { return check(gctx, loaded.snapshot()) })
	if err := g.Wait(); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("interrupted; %s: %w", unchanged, ctx.Err())
		}
		return err
	}
	flushing.Wait()
	clock.done(fmt.Sprintf("pg_restore the rest of post-data (%d entries; --jobs %d), counting the rows of every table beside it", len(plan.rest), s.jobs))
	return nil
}

// loadStream loads a stream's archive into db: by our process (copyload.go) when byCopy
// (pg_restore's options of the user's are pg_restore's to apply), else, or when the archive is
// of a kind our process leaves to pg_restore, by pg_restore and psql, once the archive's
// sha256 matched: their SQL runs as SQL.
func (s *swapRestore) loadStream(ctx context.Context, db *LocalTarget, base []string, dump string, p DumpPart, codec string, byCopy bool, tables map[string]string, loaded *loadedRows, after string) error {
	if byCopy {
		err := restorePart(ctx, dump, p, codec, copyLoad{db: db, frozen: tables, log: s.log, loaded: loaded.add}.tool(p.Tables), true, after)
		var elsewhere *loadByPgRestore
		if !errors.As(err, &elsewhere) {
			return err
		}
		s.log.Info("a stream's archive is loaded by pg_restore, once its sha256 is checked", "file", p.File, "why", elsewhere.why)
		if err := checksumFile(ctx, dump, p); err != nil {
			return fmt.Errorf("%w; %s", err, after)
		}
	}
	return restorePart(ctx, dump, p, codec, loadFrozen(db, base, streamFrozen(tables, p.Tables)), false, after)
}

// readTracker keeps the first error of its reader other than io.EOF.
type readTracker struct {
	r   io.Reader
	err error
}

func (t *readTracker) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	if err != nil && !errors.Is(err, io.EOF) && t.err == nil {
		t.err = err
	}
	return n, err
}

// loadedRows adds up the row counts of the streams loaded at once.
type loadedRows struct {
	mu   sync.Mutex
	rows map[string]int64
}

func (c *loadedRows) add(rows map[string]int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.rows == nil {
		c.rows = map[string]int64{}
	}
	for t, n := range rows {
		c.rows[t] += n
	}
}

func (c *loadedRows) snapshot() map[string]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.rows)
}

// flushEarly asks the server for a checkpoint. Dropping a database takes an immediate one,
// which would write the whole restored copy out after the swap, with nothing else going on;
// taken once the data is in, those writes overlap the index builds and the keys, which keep
// the cores busy, and the drop's checkpoint finds little left. CHECKPOINT needs a superuser
// (or pg_checkpoint, PostgreSQL 15): without one, the drop writes it all, as it would anyway.
func (s *swapRestore) flushEarly(ctx context.Context, began time.Time) {
	if _, err := s.adminScript(ctx, "CHECKPOINT"); err != nil {
		if ctx.Err() == nil {
			s.log.Debug("no checkpoint before the swap: the replaced database's drop will write the restored copy out", "error", err)
		}
		return
	}
	s.log.Info("checkpoint taken: the restored data is on disk", "after", time.Since(began))
}

// buildForeignKeys builds the foreign keys ids on db: those pg_restore must build whole by
// restore, then the others added NOT VALID in one session and validated in up to s.jobs
// sessions at once (splitForeignKey). One after the other, so that no two sessions that lock
// two tables each can wait for each other.
func (s *swapRestore) buildForeignKeys(ctx context.Context, db Target, plan *postDataPlan, ids []int, restore func(context.Context, []int) error) error {
	var whole []int
	var adds, validates []string
	for _, fk := range plan.fks {
		switch {
		case !slices.Contains(ids, fk.id):
		case fk.validate == "":
			whole = append(whole, fk.id)
		default:
			adds, validates = append(adds, fk.add), append(validates, fk.validate)
		}
	}
	if err := restore(ctx, whole); err != nil {
		return err
	}
	settings := strings.Join(plan.settings, "\n")
	run := func(ctx context.Context, what string, statements []string) error {
		args := slices.Clone(psqlArgs)
		if settings != "" {
			args = append(args, "-c", settings)
		}
		for _, st := range statements {
			args = append(args, "-c", st)
		}
		stderr := newTail(4096)
		if err := db.Run(ctx, "psql", args, Stdio{Stdout: io.Discard, Stderr: stderr}); err != nil {
			return fmt.Errorf("%s in the new database failed: %w", what, withStderr(err, stderr))
		}
		return nil
	}
	for chunk := range slices.Chunk(adds, countStatementsPerRun) {
		if err := run(ctx, "adding foreign keys NOT VALID", chunk); err != nil {
			return err
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(s.jobs, 1))
	for _, v := range validates {
		g.Go(func() error { return run(gctx, "validating a foreign key", []string{v}) })
	}
	return g.Wait()
}

// restList names the list file of restoreStreams' last pass.
const restList = "rest.list"

// restoreInOneSession restores a dump in streams in one transaction of one psql session (see
// above). run is the pg_restore that read the dump's tables of contents, tables the dump's
// tables.
func restoreInOneSession(ctx context.Context, target Target, run toolRunner, dumps []string, m *Manifest, tables []string, restoreArgs []string) (err error) {
	// The session's input: what we write, then each pg_restore's SQL, in turn.
	sqlR, sqlW, err := os.Pipe()
	if err != nil {
		return err
	}
	_ = widenPipe(sqlW)
	psqlErr := newTail(8192)
	done := make(chan error, 1)
	go func() {
		err := target.Run(ctx, "psql", append(slices.Clone(psqlArgs), "-f", "-"), Stdio{Stdin: sqlR, Stdout: io.Discard, Stderr: psqlErr})
		_ = sqlR.Close() // our writes to a psql that stopped fail instead of blocking
		done <- err
	}()
	// end closes the session's input, with COMMIT when nothing failed, else without: psql then
	// ends the session with the transaction open, and the server rolls it back. When psql
	// stopped on an SQL error first, that error is the cause of the failure.
	end := func(cause error) error {
		if cause == nil {
			if _, err := io.WriteString(sqlW, "COMMIT;\n"); err != nil {
				cause = fmt.Errorf("writing COMMIT: %w", err)
			}
		}
		_ = sqlW.Close()
		perr := <-done
		switch {
		case perr != nil && (cause == nil || (!errors.Is(cause, ErrChecksum) && !errors.Is(cause, ErrUnreadable) && ctx.Err() == nil)):
			return fmt.Errorf("psql failed; %s: %w", nothingCommitted, withStderr(perr, psqlErr))
		case cause != nil:
			return cause
		}
		return nil
	}
	// pg_restore --clean drops the dump's foreign keys with the rest of post-data, which the
	// first pass leaves for the end: drop those of the dump's tables first, or dropping a table
	// another one references would fail (they are created again with post-data).
	if _, err := io.WriteString(sqlW, "BEGIN;\n"+dropForeignKeysSQL(tables)); err != nil {
		return end(fmt.Errorf("starting psql: %w; %s", err, nothingCommitted))
	}
	parts := m.Parts()
	type pass struct {
		part int
		args []string
	}
	passes := []pass{{0, []string{"--clean", "--if-exists", "--section=pre-data", "--section=data"}}}
	for i := range parts[1:] {
		passes = append(passes, pass{i + 1, []string{"--data-only"}})
	}
	passes = append(passes, pass{0, []string{"--section=post-data"}})
	for _, ps := range passes {
		args := append(append([]string{"--file=-", "--no-owner", "--exit-on-error"}, ps.args...), restoreArgs...)
		err := restorePart(ctx, dumps[ps.part], parts[ps.part], m.Compression.Codec, func(ctx context.Context, stdin io.Reader, stderr io.Writer) error {
			return run(ctx, args, stdin, sqlW, stderr)
		}, false, nothingCommitted)
		if err != nil {
			return end(err)
		}
	}
	return end(nil)
}

// dropForeignKeysSQL drops the foreign keys of the tables that exist among tables
// ("schema.name", as pg_restore --list names them), through psql's \gexec.
func dropForeignKeysSQL(tables []string) string {
	if len(tables) == 0 {
		return ""
	}
	names := make([]string, len(tables))
	for i, t := range tables {
		schema, name, _ := strings.Cut(t, ".")
		names[i] = sqlLiteral(streamTable{Schema: schema, Name: name}.pattern())
	}
	return "SET standard_conforming_strings = on;\n" +
		"SELECT format('ALTER TABLE %s DROP CONSTRAINT %I', c.conrelid::regclass, c.conname) FROM pg_constraint c " +
		"WHERE c.contype = 'f' AND c.conrelid IN (SELECT to_regclass(n) FROM unnest(ARRAY[" + strings.Join(names, ", ") + "]::text[]) n)\n\\gexec\n"
}

// sqlLiteral quotes s as an SQL string literal (standard_conforming_strings on).
func sqlLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
