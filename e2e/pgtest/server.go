// Package pgtest starts a real, throw-away PostgreSQL server for tests and
// benchmarks: initdb + pg_ctl on a temporary directory, TCP on a free port of
// 127.0.0.1 with password (scram) authentication, and a unix socket in the
// temporary directory. It also seeds a realistic schema and computes
// per-table content checksums so two databases can be compared.
//
// Missing binaries are an error that says how to install them: tests never
// skip because PostgreSQL is absent.
package pgtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// InstallHint is printed whenever a PostgreSQL binary cannot be found.
const InstallHint = "install PostgreSQL server and client binaries: apt-get update && apt-get install -y postgresql postgresql-client"

// BinDirEnv overrides the discovery of the PostgreSQL bin directory.
const BinDirEnv = "PGTEST_BINDIR"

// Server is a running PostgreSQL instance owned by the caller.
type Server struct {
	BinDir    string // directory with initdb, pg_ctl, postgres, psql, pg_dump, pg_restore
	Dir       string // temporary root, removed by Close
	DataDir   string
	SocketDir string
	LogFile   string
	Host      string // always 127.0.0.1
	Port      int
	User      string // superuser created by initdb
	Database  string // database created at start (defaults to User's name)
	password  string

	cred    *syscall.Credential // set when running as root: the server runs as this user
	closed  bool
	running bool
}

type config struct {
	binDir   string
	user     string
	password string
	database string
	settings map[string]string
}

// Option configures Start.
type Option func(*config)

// WithBinDir uses the PostgreSQL binaries of dir instead of discovering them.
func WithBinDir(dir string) Option { return func(c *config) { c.binDir = dir } }

// WithUser sets the superuser name (default "polyaxon").
func WithUser(name string) Option { return func(c *config) { c.user = name } }

// WithPassword sets the superuser password (default: random).
func WithPassword(p string) Option { return func(c *config) { c.password = p } }

// WithDatabase sets the database created at start (default "polyaxon").
func WithDatabase(name string) Option { return func(c *config) { c.database = name } }

// WithSetting adds a postgresql.conf setting (e.g. "fsync", "off").
func WithSetting(key, value string) Option {
	return func(c *config) { c.settings[key] = value }
}

// WithFastUnsafe turns durability off: fine for tests, never for benchmarks
// that measure restore speed against real-world settings.
func WithFastUnsafe() Option {
	return func(c *config) {
		c.settings["fsync"] = "off"
		c.settings["synchronous_commit"] = "off"
		c.settings["full_page_writes"] = "off"
	}
}

// BinDir finds the newest /usr/lib/postgresql/<ver>/bin holding initdb
// (or $PGTEST_BINDIR).
func BinDir() (string, error) {
	if d := os.Getenv(BinDirEnv); d != "" {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err != nil {
			return "", fmt.Errorf("%s=%s: no initdb there: %w; %s", BinDirEnv, d, err, InstallHint)
		}
		return d, nil
	}
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(matches) == 0 {
		if p, err := exec.LookPath("initdb"); err == nil {
			return filepath.Dir(p), nil
		}
		return "", fmt.Errorf("no PostgreSQL server binaries found (looked for /usr/lib/postgresql/*/bin/initdb and initdb on PATH): %s", InstallHint)
	}
	sort.Slice(matches, func(i, j int) bool { return versionOf(matches[i]) > versionOf(matches[j]) })
	return filepath.Dir(matches[0]), nil
}

func versionOf(initdbPath string) float64 {
	v, _ := strconv.ParseFloat(filepath.Base(filepath.Dir(filepath.Dir(initdbPath))), 64)
	return v
}

// SkipIfShort skips a test that needs a PostgreSQL server under `go test -short` (make unit).
func SkipIfShort(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("needs a PostgreSQL server: skipped with -short")
	}
}

// New starts a server for a test and stops it (and removes its files) on
// t.Cleanup. It fails the test when the server cannot start, and skips it under -short.
func New(t testing.TB, opts ...Option) *Server {
	t.Helper()
	SkipIfShort(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := Start(ctx, opts...)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("pgtest: %v", err)
		}
	})
	return s
}

// Start initialises and starts a server. The caller must Close it.
func Start(ctx context.Context, opts ...Option) (*Server, error) {
	cfg := &config{user: "polyaxon", database: "polyaxon", settings: map[string]string{}}
	for _, o := range opts {
		o(cfg)
	}
	if cfg.binDir == "" {
		d, err := BinDir()
		if err != nil {
			return nil, err
		}
		cfg.binDir = d
	}
	for _, tool := range []string{"initdb", "pg_ctl", "postgres", "psql", "pg_dump", "pg_restore"} {
		if _, err := os.Stat(filepath.Join(cfg.binDir, tool)); err != nil {
			return nil, fmt.Errorf("PostgreSQL binary %s missing in %s: %s", tool, cfg.binDir, InstallHint)
		}
	}
	if cfg.password == "" {
		b := make([]byte, 16)
		_, _ = rand.Read(b)
		cfg.password = "pw-" + hex.EncodeToString(b)
	}

	root, err := os.MkdirTemp("", "pgtest-")
	if err != nil {
		return nil, fmt.Errorf("creating temporary directory: %w", err)
	}
	s := &Server{
		BinDir:    cfg.binDir,
		Dir:       root,
		DataDir:   filepath.Join(root, "data"),
		SocketDir: filepath.Join(root, "sock"),
		LogFile:   filepath.Join(root, "server.log"),
		Host:      "127.0.0.1",
		User:      cfg.user,
		Database:  cfg.database,
		password:  cfg.password,
	}
	fail := func(err error) (*Server, error) {
		_ = os.RemoveAll(root)
		return nil, err
	}
	// initdb refuses to run as root: run the server as the postgres OS user.
	if os.Geteuid() == 0 {
		cred, err := unprivilegedCredential()
		if err != nil {
			return fail(err)
		}
		s.cred = cred
	}
	for _, d := range []string{s.DataDir, s.SocketDir} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return fail(err)
		}
	}
	pwfile := filepath.Join(root, "pwfile")
	if err := os.WriteFile(pwfile, []byte(cfg.password+"\n"), 0o600); err != nil {
		return fail(err)
	}
	if s.cred != nil {
		if err := os.Chmod(root, 0o755); err != nil {
			return fail(err)
		}
		for _, p := range []string{root, s.DataDir, s.SocketDir, pwfile} {
			if err := os.Chown(p, int(s.cred.Uid), int(s.cred.Gid)); err != nil {
				return fail(fmt.Errorf("chown %s: %w", p, err))
			}
		}
	}
	out, err := s.runAsServer(ctx, "initdb", "-D", s.DataDir, "-U", cfg.user, "--pwfile="+pwfile,
		"--auth-host=scram-sha-256", "--auth-local=trust", "-E", "UTF8", "--locale=C.UTF-8", "--no-sync")
	_ = os.Remove(pwfile)
	if err != nil {
		return fail(fmt.Errorf("initdb: %w\n%s", err, out))
	}

	port, err := freePort()
	if err != nil {
		return fail(err)
	}
	s.Port = port
	conf := []string{
		"listen_addresses = '127.0.0.1'",
		fmt.Sprintf("port = %d", port),
		fmt.Sprintf("unix_socket_directories = '%s'", s.SocketDir),
		"max_connections = 50",
		"log_min_messages = warning",
	}
	keys := slices.Sorted(maps.Keys(cfg.settings))
	for _, k := range keys {
		conf = append(conf, fmt.Sprintf("%s = '%s'", k, cfg.settings[k]))
	}
	f, err := os.OpenFile(filepath.Join(s.DataDir, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return fail(err)
	}
	_, err = f.WriteString("\n# pgtest\n" + strings.Join(conf, "\n") + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fail(err)
	}
	if err := s.Restart(ctx); err != nil {
		return fail(err)
	}
	if cfg.database != "postgres" {
		if err := s.CreateDatabase(ctx, cfg.database); err != nil {
			_ = s.Close()
			return nil, err
		}
	}
	return s, nil
}

func unprivilegedCredential() (*syscall.Credential, error) {
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("running as root and no 'postgres' OS user to run the server as (initdb refuses root): %w; %s", err, InstallHint)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// runAsServer runs a server-side tool (initdb, pg_ctl) as the server's OS user.
func (s *Server) runAsServer(ctx context.Context, tool string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(s.BinDir, tool), args...)
	cmd.Dir = s.Dir
	cmd.Env = append(os.Environ(), "LC_ALL=C.UTF-8")
	if s.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
		cmd.Env = append(cmd.Env, "HOME="+s.Dir)
	}
	return cmd.CombinedOutput()
}

// Restart starts the server (again) after Stop.
func (s *Server) Restart(ctx context.Context) error {
	out, err := s.runAsServer(ctx, "pg_ctl", "start", "-w", "-t", "60", "-D", s.DataDir, "-l", s.LogFile)
	if err != nil {
		log, _ := os.ReadFile(s.LogFile)
		return fmt.Errorf("pg_ctl start: %w\n%s\nserver log:\n%s", err, out, log)
	}
	s.running = true
	return nil
}

// Stop stops the server with a pg_ctl shutdown mode: "smart", "fast" or
// "immediate" (the latter simulates a crash).
func (s *Server) Stop(ctx context.Context, mode string) error {
	if !s.running {
		return nil
	}
	out, err := s.runAsServer(ctx, "pg_ctl", "stop", "-w", "-t", "60", "-m", mode, "-D", s.DataDir)
	if err != nil {
		return fmt.Errorf("pg_ctl stop -m %s: %w\n%s", mode, err, out)
	}
	s.running = false
	return nil
}

// Close stops the server and removes its files.
func (s *Server) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := s.Stop(ctx, "fast")
	if err != nil {
		err = errors.Join(err, s.Stop(ctx, "immediate"))
	}
	return errors.Join(err, os.RemoveAll(s.Dir))
}

// Password returns the superuser password. It is a method, not a field, so
// printing a Server never shows it.
func (s *Server) Password() string { return s.password }

// Bin returns the path of a PostgreSQL tool of this server's version.
func (s *Server) Bin(tool string) string { return filepath.Join(s.BinDir, tool) }

// Env returns libpq environment variables for TCP + password access to db.
func (s *Server) Env(db string) []string {
	return []string{
		"PGHOST=" + s.Host,
		"PGPORT=" + strconv.Itoa(s.Port),
		"PGUSER=" + s.User,
		"PGDATABASE=" + db,
		"PGPASSWORD=" + s.password,
		"PGCONNECT_TIMEOUT=10",
	}
}

// Psql runs SQL against db (over TCP, with the password in the environment
// only) and returns unaligned, tuples-only output without the final newline.
func (s *Server) Psql(ctx context.Context, db, sql string) (string, error) {
	cmd := exec.CommandContext(ctx, s.Bin("psql"), "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-f", "-")
	cmd.Env = append(append(os.Environ(), s.Env(db)...), "PGOPTIONS=-c client_min_messages=warning")
	cmd.Stdin = strings.NewReader(sql)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("psql on database %q: %w: %s", db, err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimRight(stdout.String(), "\n"), nil
}

// CreateDatabase creates an empty database owned by the superuser.
func (s *Server) CreateDatabase(ctx context.Context, name string) error {
	_, err := s.Psql(ctx, "postgres", fmt.Sprintf(`CREATE DATABASE %q`, name))
	return err
}
