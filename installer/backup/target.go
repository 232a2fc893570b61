package backup

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Stdio are the streams of one PostgreSQL client program run.
type Stdio struct {
	Stdin  io.Reader // nil: no input
	Stdout io.Writer
	Stderr io.Writer
}

// Target runs PostgreSQL client programs (pg_dump, pg_restore, psql)
// against one database. The target supplies the connection and the
// password itself (in the environment of the process), so callers pass
// only the tool's own flags and the password never reaches a command line.
type Target interface {
	// Run runs tool with args; it returns an error when the tool cannot be
	// started or exits non-zero.
	Run(ctx context.Context, tool string, args []string, stdio Stdio) error
	// Kind is SourceInCluster, SourceExternal or SourceLocal.
	Kind() string
	// String names the endpoint without secrets, for logs and manifests.
	String() string
}

// Conn is how a local client reaches PostgreSQL. The password is never
// printed by String/GoString.
type Conn struct {
	Host     string
	Port     int
	User     string
	Database string
	Password string
	// SSLMode, when set, becomes PGSSLMODE.
	SSLMode string
}

func (c Conn) String() string {
	return fmt.Sprintf("%s@%s:%d/%s", c.User, c.Host, c.Port, c.Database)
}

// GoString keeps %#v from printing the password.
func (c Conn) GoString() string { return "backup.Conn{" + c.String() + "}" }

// LocalTarget runs the PostgreSQL client programs on this machine.
type LocalTarget struct {
	conn   Conn
	binDir string
	env    []string
}

// LocalOption configures a LocalTarget.
type LocalOption func(*LocalTarget)

// WithLocalBinDir runs tools from dir instead of $PATH (e.g. the bin
// directory of the PostgreSQL version matching the server).
func WithLocalBinDir(dir string) LocalOption { return func(t *LocalTarget) { t.binDir = dir } }

// WithLocalEnv adds environment variables for the tools (e.g. PGSSLROOTCERT).
func WithLocalEnv(kv ...string) LocalOption {
	return func(t *LocalTarget) { t.env = append(t.env, kv...) }
}

// NewLocalTarget returns a target that runs pg_dump/pg_restore/psql here,
// with the connection and PGPASSWORD in the child's environment only.
func NewLocalTarget(conn Conn, opts ...LocalOption) *LocalTarget {
	if conn.Host == "" {
		conn.Host = "127.0.0.1"
	}
	if conn.Port == 0 {
		conn.Port = 5432
	}
	t := &LocalTarget{conn: conn}
	for _, o := range opts {
		o(t)
	}
	return t
}

// onDatabase is the same target on another database of the same server.
func (t *LocalTarget) onDatabase(name string) *LocalTarget {
	c := *t
	c.conn.Database = name
	return &c
}

func (t *LocalTarget) Kind() string   { return SourceLocal }
func (t *LocalTarget) String() string { return "local " + t.conn.String() }

// Bin is the path (or bare name for $PATH lookup) of tool.
func (t *LocalTarget) Bin(tool string) string {
	if t.binDir != "" {
		return filepath.Join(t.binDir, tool)
	}
	return tool
}

func (t *LocalTarget) Run(ctx context.Context, tool string, args []string, stdio Stdio) error {
	full := append([]string{}, args...)
	if tool == "pg_restore" && t.conn.Database != "" && NeedsConnection(tool, args) {
		// pg_restore without -d writes SQL to stdout instead of restoring.
		full = append(full, "--dbname="+t.conn.Database)
	}
	cmd := exec.CommandContext(ctx, t.Bin(tool), full...)
	// Later entries win in exec.Cmd.Env: ours override inherited PG* values.
	env := append(os.Environ(),
		"PGHOST="+t.conn.Host,
		"PGPORT="+strconv.Itoa(t.conn.Port),
		"PGUSER="+t.conn.User,
		"PGDATABASE="+t.conn.Database,
		"PGCONNECT_TIMEOUT=30",
	)
	if t.conn.Password != "" {
		env = append(env, "PGPASSWORD="+t.conn.Password)
	}
	if t.conn.SSLMode != "" {
		env = append(env, "PGSSLMODE="+t.conn.SSLMode)
	}
	cmd.Env = append(env, t.env...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdio.Stdin, stdio.Stdout, stdio.Stderr
	if tool == "pg_restore" {
		// pg_restore --jobs forks workers that a SIGKILL of the leader leaves running (and
		// holding our pipes); on SIGTERM the leader stops them itself.
		cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
		cmd.WaitDelay = 30 * time.Second
	}
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return fmt.Errorf("%s exited with code %d", tool, ee.ExitCode())
		}
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("%s not found (%w): install the PostgreSQL client of the server's major version or newer (apt-get install -y postgresql-client), or pass its bin directory", t.Bin(tool), err)
		}
		return fmt.Errorf("running %s: %w", tool, err)
	}
	return nil
}

// NeedsConnection is false for pg_restore runs that only read the archive
// (--list, --file): they must not get --dbname (pg_restore refuses -d with -f).
func NeedsConnection(tool string, args []string) bool {
	if tool != "pg_restore" {
		return true
	}
	for _, a := range args {
		if a == "--list" || a == "-l" || a == "-f" || strings.HasPrefix(a, "--file") {
			return false
		}
	}
	return true
}

// tailBuffer keeps the last max bytes written (a tool's stderr for error
// messages) without growing with the stream.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func newTail(max int) *tailBuffer { return &tailBuffer{max: max} }

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if len(b.buf) > b.max {
		b.buf = append(b.buf[:0:0], b.buf[len(b.buf)-b.max:]...)
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.TrimSpace(string(b.buf))
}

// withStderr appends a tool's stderr tail to err.
func withStderr(err error, stderr *tailBuffer) error {
	if s := stderr.String(); s != "" {
		return fmt.Errorf("%w: %s", err, s)
	}
	return err
}
