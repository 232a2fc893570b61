package backup

import (
	"context"
	"filippo.io/age"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"time"
)

// ReleaseInfo identifies the Helm release a backup belongs to.
type ReleaseInfo struct {
	Name         string
	Namespace    string
	Revision     int
	ChartVersion string
	AppVersion   string
}

// SecretsFunc returns the document saved as secrets.json (a Kubernetes v1
// List of Secrets) and the names of the Secrets in it.
type SecretsFunc func(ctx context.Context) (doc []byte, names []string, err error)

// Scaler stops the writers of the database for a restore. ScaleDown returns
// a function that scales them back to what they were.
type Scaler interface {
	ScaleDown(ctx context.Context) (restore func(context.Context) error, err error)
}

type config struct {
	outputDir       string
	release         ReleaseInfo
	secrets         SecretsFunc
	compression     Compression
	dumpCompression string
	dumpArgs        []string
	logger          *slog.Logger
	progress        func(rawBytes int64)
	now             func() time.Time
	toolsDir        string
	identities      []age.Identity
	verifyTarget    Target
	full            bool
	scaler          Scaler
	runningApp      string
	force           bool
	restoreArgs     []string
	jobs            int
	dumpJobs        int
	targetRelease   ReleaseInfo
	registerCleanup func(cleanup func()) (unregister func())
}

// Create, Verify and Restore each take options of their own type (kind's CreateOption): an
// option is of the types of the operations it applies to, so passing one to an operation it
// does not apply to does not compile.
type (
	CreateOption interface {
		apply(*config)
		create()
	}
	VerifyOption interface {
		apply(*config)
		verify()
	}
	RestoreOption interface {
		apply(*config)
		restore()
	}
)

func newConfig[O interface{ apply(*config) }](opts []O) *config {
	c := &config{
		outputDir:   DefaultDir(),
		compression: Compression{Codec: DefaultCodec, Level: DefaultLevel},
		logger:      slog.New(slog.NewTextHandler(io.Discard, nil)),
		now:         time.Now,
	}
	for _, o := range opts {
		o.apply(c)
	}
	if c.jobs <= 0 {
		c.jobs = min(runtime.NumCPU(), 4)
	}
	if c.dumpCompression == "" {
		c.dumpCompression = "0"
		if c.compression.Codec == CodecNone {
			c.dumpCompression = "" // pg_dump's own default
		}
	}
	return c
}

// setter is the body of every option; the markers below say which operations take it.
type setter func(*config)

func (s setter) apply(c *config) { s(c) }

type (
	forCreate  struct{}
	forVerify  struct{}
	forRestore struct{}
)

func (forCreate) create()   {}
func (forVerify) verify()   {}
func (forRestore) restore() {}

// Option types by the operations they apply to.
type (
	// CreateOnly options: WithOutputDir, WithRelease, WithSecrets, WithCompression,
	// WithDumpCompression, WithDumpArgs, WithDumpJobs, WithProgress, WithCleanupRegistry,
	// WithClock.
	CreateOnly struct {
		setter
		forCreate
	}
	// VerifyOnly options: WithVerifyTarget (Restore verifies on its own target).
	VerifyOnly struct {
		setter
		forVerify
	}
	// RestoreOnly options: WithRestoreArgs, WithJobs, WithScaler, WithRunningAppVersion,
	// WithForce, WithTargetRelease.
	RestoreOnly struct {
		setter
		forRestore
	}
	// ReadOption options read a dump: WithToolsDir, WithFullCheck (Verify, Restore).
	ReadOption struct {
		setter
		forVerify
		forRestore
	}
	// AnyOption options apply to all three: WithLogger.
	AnyOption struct {
		setter
		forCreate
		forVerify
		forRestore
	}
)

// WithOutputDir is where Create puts backup directories (default DefaultDir()).
func WithOutputDir(dir string) CreateOnly {
	return CreateOnly{setter: func(c *config) { c.outputDir = dir }}
}

// WithRelease records the release in the manifest and names the directory.
func WithRelease(r ReleaseInfo) CreateOnly {
	return CreateOnly{setter: func(c *config) { c.release = r }}
}

// WithSecrets makes Create save the release's Secrets as secrets.json (0600).
func WithSecrets(f SecretsFunc) CreateOnly {
	return CreateOnly{setter: func(c *config) { c.secrets = f }}
}

// WithCompression selects the codec and level applied on our side.
func WithCompression(codec string, level int) CreateOnly {
	return CreateOnly{setter: func(c *config) { c.compression = Compression{Codec: codec, Level: level} }}
}

// WithDumpCompression passes --compress=v to pg_dump. Default "0" with the zstd codec (we
// compress), pg_dump's default with codec none.
func WithDumpCompression(v string) CreateOnly {
	return CreateOnly{setter: func(c *config) { c.dumpCompression = v }}
}

// WithDumpArgs adds pg_dump flags, e.g. --exclude-table-data=x.
func WithDumpArgs(args ...string) CreateOnly {
	return CreateOnly{setter: func(c *config) { c.dumpArgs = append(c.dumpArgs, args...) }}
}

// WithRestoreArgs adds pg_restore flags.
func WithRestoreArgs(args ...string) RestoreOnly {
	return RestoreOnly{setter: func(c *config) { c.restoreArgs = append(c.restoreArgs, args...) }}
}

// WithJobs is how many pg_restore jobs restore a local target (default: the CPUs here, at
// most 4): with more than one, the dump is restored into a new database, checked, and swapped
// in for the target's; 1 restores in one transaction, in place.
func WithJobs(n int) RestoreOnly {
	return RestoreOnly{setter: func(c *config) { c.jobs = n }}
}

// WithDumpJobs is how many parallel streams carry the large tables' data, beside the stream
// with the schema (streams.go; default: one per core of the server, at most 4, as many as the
// tables' sizes let help, and none for a database under 64 MiB). 1 writes a dump in one
// archive, which older polyaxon-deploy read too.
func WithDumpJobs(n int) CreateOnly {
	return CreateOnly{setter: func(c *config) { c.dumpJobs = n }}
}

// WithLogger sets the logger. Nothing secret is ever logged.
func WithLogger(l *slog.Logger) AnyOption {
	return AnyOption{setter: func(c *config) { c.logger = l }}
}

// WithProgress is called with the bytes pg_dump produced so far. It runs on the streaming
// path: a slow callback slows the dump.
func WithProgress(f func(rawBytes int64)) CreateOnly {
	return CreateOnly{setter: func(c *config) { c.progress = f }}
}

// WithCleanupRegistry hands Create's removal of its unfinished directory to register, for a
// caller that may end the process before Create returns (a second Ctrl-C exits at once): it
// runs the registered cleanups on its way out. Create unregisters when it returns.
func WithCleanupRegistry(register func(cleanup func()) (unregister func())) CreateOnly {
	return CreateOnly{setter: func(c *config) { c.registerCleanup = register }}
}

// WithClock replaces time.Now, for tests.
func WithClock(now func() time.Time) CreateOnly {
	return CreateOnly{setter: func(c *config) { c.now = now }}
}

// WithToolsDir runs the local pg_restore from dir.
func WithToolsDir(dir string) ReadOption {
	return ReadOption{setter: func(c *config) { c.toolsDir = dir }}
}

// WithVerifyTarget lets Verify run pg_restore on t (e.g. the database pod, whose client
// matches the server) when the local one is missing or too old for the dump.
func WithVerifyTarget(t Target) VerifyOnly {
	return VerifyOnly{setter: func(c *config) { c.verifyTarget = t }}
}

// WithIdentities opens a backup sealed with age (Encrypt) with these private keys.
func WithIdentities(ids ...age.Identity) ReadOption {
	return ReadOption{setter: func(c *config) { c.identities = ids }}
}

// WithFullCheck also reads every data block (pg_restore into /dev/null), not only the table
// of contents; Restore does it before restoring (a second read).
func WithFullCheck() ReadOption {
	return ReadOption{setter: func(c *config) { c.full = true }}
}

// WithScaler scales the database writers down during Restore.
func WithScaler(s Scaler) RestoreOnly {
	return RestoreOnly{setter: func(c *config) { c.scaler = s }}
}

// WithRunningAppVersion is the app version now deployed: Restore refuses a backup taken from
// a newer one unless WithForce.
func WithRunningAppVersion(v string) RestoreOnly {
	return RestoreOnly{setter: func(c *config) { c.runningApp = v }}
}

// WithForce lets Restore accept a backup from a newer app version, or from another release
// or namespace than WithTargetRelease's.
func WithForce() RestoreOnly {
	return RestoreOnly{setter: func(c *config) { c.force = true }}
}

// WithTargetRelease names the release and namespace Restore writes into: a backup whose
// manifest names others is refused (ErrOtherRelease) unless WithForce.
func WithTargetRelease(name, namespace string) RestoreOnly {
	return RestoreOnly{setter: func(c *config) { c.targetRelease = ReleaseInfo{Name: name, Namespace: namespace} }}
}

// DirEnv overrides DefaultDir.
const DirEnv = "POLYAXON_DEPLOY_BACKUP_DIR"

// DefaultDir is where backups go unless told otherwise: $POLYAXON_DEPLOY_BACKUP_DIR,
// else $XDG_DATA_HOME/polyaxon-deploy/backups (~/.local/share/...), so that
// `backup list` and the upgrade pipeline find them whatever the working directory.
func DefaultDir() string {
	if d := os.Getenv(DirEnv); d != "" {
		return d
	}
	if d := os.Getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "polyaxon-deploy", "backups")
	}
	if h, err := os.UserHomeDir(); err == nil {
		return filepath.Join(h, ".local", "share", "polyaxon-deploy", "backups")
	}
	return "polyaxon-backups"
}
