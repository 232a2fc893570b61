package backup

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// A restore by swap: pg_restore -j restores the dump into a new database on the same server,
// the restored tables are checked there, and only then is the new database renamed over the
// target's (both renames in one transaction) and the old one dropped. One transaction cannot
// be shared by pg_restore's parallel connections; the swap keeps what the one-transaction
// restore promises: until the check has passed, the target database is not touched.
//
// pg_restore -j needs the archive as a file, so the dump is first decoded into a spool file in
// $TMPDIR and its sha256 checked against the manifest. That is why only local targets (the
// client programs on this machine) restore this way; in a pod the dump is streamed into one
// transaction.

// swapRestore is the plan of a restore by swap on one server.
type swapRestore struct {
	target *LocalTarget // the database being replaced
	// admin reaches a maintenance database of the same server: no database can be renamed by
	// a session connected to it.
	admin   *LocalTarget
	db      databaseProps
	jobs    int
	scratch string // the new database, once created
	retired string // the old database, renamed by the swap until it is dropped
	log     *slog.Logger
}

// databaseProps are the target database's properties that a new database must be created
// with to stand in for it.
type databaseProps struct {
	owner, encoding, collate, ctype string
	connLimit                       int
	serverVersion                   int
}

// planSwapSQL reads, in one row, whether the current role may create and rename databases and
// the target database's properties, and what a new database would not carry over (privileges,
// settings, a comment, a tablespace, a locale provider other than libc). to_jsonb reads
// datlocprovider where the server has it (15 and later) without failing where it does not.
const planSwapSQL = `SELECT r.rolsuper OR (r.rolcreatedb AND d.datdba = r.oid),
  pg_get_userbyid(d.datdba), pg_encoding_to_char(d.encoding), d.datcollate, d.datctype, d.datconnlimit,
  current_setting('server_version_num'),
  d.datacl IS NULL,
  NOT EXISTS (SELECT 1 FROM pg_db_role_setting s WHERE s.setdatabase = d.oid),
  NOT EXISTS (SELECT 1 FROM pg_shdescription c WHERE c.objoid = d.oid AND c.classoid = 'pg_database'::regclass),
  t.spcname = 'pg_default',
  coalesce(to_jsonb(d)->>'datlocprovider', 'c') = 'c'
FROM pg_database d JOIN pg_roles r ON r.rolname = current_user JOIN pg_tablespace t ON t.oid = d.dattablespace
WHERE d.datname = current_database()`

// planSwap returns how to restore into target by swap, or why it cannot (the restore then
// runs in one transaction). It only reads.
func planSwap(ctx context.Context, target Target, cfg *config) (_ *swapRestore, whyNot string) {
	switch {
	case cfg.jobs == 1:
		return nil, "one pg_restore job asked for"
	case selectsPart(cfg.restoreArgs):
		return nil, "pg_restore is told to restore only part of the dump, which replaces only those objects"
	}
	local, ok := target.(*LocalTarget)
	if !ok {
		return nil, "pg_restore runs in " + target.String() + ", where the dump cannot be spooled to a file for parallel jobs"
	}
	answer, err := psqlQuery(ctx, local, planSwapSQL)
	if err != nil {
		return nil, "reading the database's properties failed: " + err.Error()
	}
	f := strings.Split(answer, "|")
	if len(f) != 12 {
		return nil, fmt.Sprintf("unexpected answer %q about the database's properties", answer)
	}
	db := databaseProps{owner: f[1], encoding: f[2], collate: f[3], ctype: f[4]}
	db.connLimit, _ = strconv.Atoi(f[5])
	db.serverVersion, _ = strconv.Atoi(f[6])
	for _, c := range []struct {
		field int
		why   string
	}{
		{0, fmt.Sprintf("the role %s may not create databases (CREATEDB) or does not own %s", local.conn.User, local.conn.Database)},
		{7, "the database has privileges of its own (GRANT ... ON DATABASE), which a new database would not have"},
		{8, "the database has settings of its own (ALTER DATABASE ... SET), which a new database would not have"},
		{9, "the database has a comment, which a new database would not have"},
		{10, "the database is not in the default tablespace"},
		{11, "the database uses a locale provider other than libc"},
	} {
		if f[c.field] != "t" {
			return nil, c.why
		}
	}
	if db.serverVersion < 100000 {
		return nil, "the server is older than PostgreSQL 10"
	}
	s := &swapRestore{target: local, db: db, jobs: cfg.jobs, log: cfg.logger}
	for _, name := range []string{"postgres", "template1"} {
		if name == local.conn.Database {
			continue // a session cannot rename the database it is connected to
		}
		admin := local.onDatabase(name)
		if _, err := psqlQuery(ctx, admin, "SELECT 1"); err == nil {
			s.admin = admin
			if cfg.scaler == nil {
				// Nothing will stop the target's clients: a swap would wait for them in vain
				// after the whole restore, while the one transaction works beside them.
				if sessions, err := s.sessions(ctx); err != nil || len(sessions) > 0 {
					return nil, fmt.Sprintf("the database is in use (%s) and no writers are scaled down, so it could not be replaced", strings.Join(sessions, ", "))
				}
			}
			return s, ""
		}
	}
	return nil, "no other database (postgres, template1) accepts a connection, and a database cannot be renamed from a session on it"
}

// errSpoolSpace: the spool file did not fit; the restore can still stream the dump.
var errSpoolSpace = errors.New("no space for the spool file")

// spool decodes the dump into a file for pg_restore -j, checking its sha256 on the way. The
// caller removes the file.
func spool(ctx context.Context, dump string, p DumpPart, codec string) (path string, err error) {
	in, err := openDumpReader(ctx, dump, codec, false)
	if err != nil {
		return "", err
	}
	defer in.Close()
	out, err := os.CreateTemp("", "polyaxon-deploy-restore-*.dump")
	if err != nil {
		return "", fmt.Errorf("creating the spool file: %w", err)
	}
	defer func() {
		if err != nil {
			_ = os.Remove(out.Name())
		}
	}()
	_, copyErr := io.Copy(out, in)
	if cerr := out.Close(); copyErr == nil {
		copyErr = cerr
	}
	if copyErr != nil {
		if errors.Is(copyErr, syscall.ENOSPC) {
			return "", fmt.Errorf("%w: %s needs %d bytes: %w", errSpoolSpace, out.Name(), p.RawSize, copyErr)
		}
		if ctx.Err() != nil {
			return "", fmt.Errorf("interrupted; %s: %w", nothingTouched, ctx.Err())
		}
		var pe *os.PathError
		if errors.As(copyErr, &pe) && pe.Path == out.Name() {
			return "", fmt.Errorf("writing the spool file: %w; %s", copyErr, nothingTouched)
		}
		if err := in.altered(p, fmt.Errorf("%s: %w", codec, copyErr), nothingTouched); err != nil {
			return "", err
		}
		return "", fmt.Errorf("%w: decompressing %s (%s): %w; %s; %s", ErrUnreadable, p.File, codec, copyErr, nothingTouched, fixHint)
	}
	if err := in.verified(p, nothingTouched); err != nil {
		return "", err
	}
	return out.Name(), nil
}

// nothingTouched ends the errors of a restore by swap that failed before its new database
// existed.
const nothingTouched = "the dump is checked before the database is touched: nothing was committed, the database is unchanged"

// restore creates the new database and restores the spooled dump into it with parallel jobs.
// The restored copy is left for check; drop removes it when the check fails.
func (s *swapRestore) restore(ctx context.Context, spoolFile string, args []string) error {
	if err := s.create(ctx); err != nil {
		return err
	}
	s.log.Info("restoring into a new database", "database", s.scratch, "jobs", s.jobs)
	args = append([]string{"--exit-on-error", "--no-owner", "--no-password", "--jobs=" + strconv.Itoa(s.jobs)}, args...)
	stderr := newTail(8192)
	if err := s.target.onDatabase(s.scratch).Run(ctx, "pg_restore", append(args, spoolFile), Stdio{Stderr: stderr}); err != nil {
		return fmt.Errorf("pg_restore into the new database %s failed: %w; %s is unchanged", s.scratch, withStderr(err, stderr), s.target.conn.Database)
	}
	return nil
}

// create creates the new database, with the target's properties, under a name of its own.
func (s *swapRestore) create(ctx context.Context) error {
	s.warnLeftovers(ctx)
	s.scratch = sideName(s.target.conn.Database, "restore")
	create := `CREATE DATABASE :"scratch" TEMPLATE template0 OWNER :"owner" ENCODING :'encoding' LC_COLLATE :'collate' LC_CTYPE :'ctype' CONNECTION LIMIT :connlimit`
	if s.db.serverVersion >= 150000 {
		create += ` LOCALE_PROVIDER libc` // the server's default provider may be another
	}
	if _, err := s.adminScript(ctx, create, "scratch", s.scratch, "owner", s.db.owner, "encoding", s.db.encoding,
		"collate", s.db.collate, "ctype", s.db.ctype, "connlimit", strconv.Itoa(s.db.connLimit)); err != nil {
		if ctx.Err() == nil {
			s.scratch = "" // refused: nothing to drop (cancelled, it may have been created)
		}
		return fmt.Errorf("creating the database to restore into: %w; the database is unchanged", err)
	}
	return nil
}

// warnLeftovers names the databases an interrupted restore by swap (killed before it could
// drop them) left beside the target: they hold a whole copy each, and only the user can tell
// whether one is still wanted.
func (s *swapRestore) warnLeftovers(ctx context.Context) {
	answer, err := s.adminScript(ctx, `SELECT datname FROM pg_database WHERE datname ~ :'pattern'`,
		"pattern", "^"+regexp.QuoteMeta(s.target.conn.Database)+"_(restore|replaced)_[0-9]+$")
	if err != nil || answer == "" {
		return
	}
	s.log.Warn("databases left by an interrupted restore: drop them (DROP DATABASE) once you know they are not needed", "databases", strings.Join(strings.Fields(answer), ", "))
}

// restored is the target that reaches the restored copy, for its check.
func (s *swapRestore) restored() Target { return s.target.onDatabase(s.scratch) }

// swap renames the restored copy over the target database in one transaction, once no
// session is left on the target (the writers were scaled down; one still connected would
// keep the rename from happening). dropRetired then drops the old database.
func (s *swapRestore) swap(ctx context.Context) error {
	db := s.target.conn.Database
	if err := s.waitForSessions(ctx, swapSessionWait); err != nil {
		return err
	}
	retired := sideName(db, "replaced")
	rename := `BEGIN;
ALTER DATABASE :"db" RENAME TO :"retired";
ALTER DATABASE :"scratch" RENAME TO :"db";
COMMIT;`
	if _, err := s.adminScript(ctx, rename, "db", db, "retired", retired, "scratch", s.scratch); err != nil {
		// psql may have been stopped after the server committed: ask the server.
		qctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		left, qerr := s.adminScript(qctx, `SELECT count(*) FROM pg_database WHERE datname = :'scratch'`, "scratch", s.scratch)
		if qerr != nil || left != "0" {
			return fmt.Errorf("renaming the restored database %s to %s: %w; %s is unchanged", s.scratch, db, err, db)
		}
		s.log.Warn("the rename was reported as failed, but the server committed it: the restored database is in place", "error", err)
	}
	s.scratch, s.retired = "", retired
	s.log.Info("restored database swapped in", "database", db, "replaced", retired)
	return nil
}

// dropRetired drops the database the swap replaced. The restore is complete by then: a
// failure is only warned about.
func (s *swapRestore) dropRetired(ctx context.Context) {
	if s.retired == "" {
		return
	}
	if err := s.dropDatabase(context.WithoutCancel(ctx), s.retired); err != nil {
		s.log.Warn("the restore is complete, but the replaced database was not dropped: drop it when no longer needed", "database", s.retired, "error", err)
		return
	}
	s.log.Info("dropped the replaced database", "database", s.retired)
	s.retired = ""
}

// drop removes the restored copy after a failure (nothing to do once it was swapped in).
func (s *swapRestore) drop(ctx context.Context) error {
	if s.scratch == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer cancel()
	if err := s.dropDatabase(ctx, s.scratch); err != nil {
		return fmt.Errorf("dropping the new database %s after the failed restore: %w: drop it by hand (DROP DATABASE)", s.scratch, err)
	}
	s.log.Info("dropped the new database of the failed restore", "database", s.scratch)
	s.scratch = ""
	return nil
}

func (s *swapRestore) dropDatabase(ctx context.Context, name string) error {
	drop := `DROP DATABASE IF EXISTS :"name"`
	if s.db.serverVersion >= 130000 {
		// A pg_restore worker that was just killed may not have left yet.
		drop += ` WITH (FORCE)`
	}
	_, err := s.adminScript(ctx, drop, "name", name)
	return err
}

// swapSessionWait is how long the swap waits for the target's sessions to end (pods of the
// scaled-down writers close theirs as they terminate).
var swapSessionWait = 2 * time.Minute

// sessions names the client sessions connected to the target database.
func (s *swapRestore) sessions(ctx context.Context) ([]string, error) {
	const q = `SELECT coalesce(nullif(application_name, ''), usename::text, 'a session') || coalesce(' from ' || client_addr::text, '')
FROM pg_stat_activity WHERE datname = :'db' AND backend_type = 'client backend' AND pid <> pg_backend_pid()`
	answer, err := s.adminScript(ctx, q, "db", s.target.conn.Database)
	if err != nil {
		return nil, fmt.Errorf("listing the sessions on %s: %w", s.target.conn.Database, err)
	}
	var sessions []string
	for _, line := range strings.Split(answer, "\n") {
		if line = strings.TrimSpace(line); line != "" {
			sessions = append(sessions, line)
		}
	}
	return sessions, nil
}

// waitForSessions waits until no client session is connected to the target database.
func (s *swapRestore) waitForSessions(ctx context.Context, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		sessions, err := s.sessions(ctx)
		if err != nil {
			return err
		}
		if len(sessions) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s still has %d sessions after %s (%s): a database in use cannot be replaced; stop its clients (scale the release's writers down) and restore again; %s is unchanged",
				s.target.conn.Database, len(sessions), limit, strings.Join(sessions, ", "), s.target.conn.Database)
		}
		s.log.Info("waiting for the database's sessions to end before the swap", "database", s.target.conn.Database, "sessions", len(sessions))
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// adminScript runs script on the maintenance database and returns its trimmed answer. The
// values come as psql variables (name, value pairs) that psql quotes itself (:"x" as an
// identifier, :'x' as a literal), so no name is ever pasted into SQL.
func (s *swapRestore) adminScript(ctx context.Context, script string, vars ...string) (string, error) {
	args := slices.Clone(psqlArgs)
	for i := 0; i+1 < len(vars); i += 2 {
		args = append(args, "-v", vars[i]+"="+vars[i+1])
	}
	var out bytes.Buffer
	stderr := newTail(4096)
	if err := s.admin.Run(ctx, "psql", append(args, "-f", "-"), Stdio{Stdin: strings.NewReader(script), Stdout: &out, Stderr: stderr}); err != nil {
		return "", withStderr(err, stderr)
	}
	return strings.TrimSpace(out.String()), nil
}

// sideName names a database beside db: db_<what>_<unix time>, within PostgreSQL's 63 bytes.
func sideName(db, what string) string {
	suffix := fmt.Sprintf("_%s_%d", what, time.Now().Unix())
	if len(db)+len(suffix) > 63 {
		db = strings.ToValidUTF8(db[:63-len(suffix)], "") // not half a character
	}
	return db + suffix
}
