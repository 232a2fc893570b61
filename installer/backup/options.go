package backup

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
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
	verifyTarget    Target
	full            bool
	scaler          Scaler
	runningApp      string
	force           bool
	restoreArgs     []string
	targetRelease   ReleaseInfo
	registerCleanup func(cleanup func()) (unregister func())
}

// Option configures Create, Verify and Restore; each documents which apply.
type Option func(*config)

func newConfig(opts []Option) *config {
	c := &config{
		outputDir:   DefaultDir(),
		compression: Compression{Codec: DefaultCodec, Level: DefaultLevel},
		logger:      slog.New(slog.NewTextHandler(io.Discard, nil)),
		now:         time.Now,
	}
	for _, o := range opts {
		o(c)
	}
	if c.dumpCompression == "" {
		c.dumpCompression = "0"
		if c.compression.Codec == CodecNone {
			c.dumpCompression = "" // pg_dump's own default
		}
	}
	return c
}

// WithOutputDir is where Create puts backup directories (default DefaultDir()).
func WithOutputDir(dir string) Option { return func(c *config) { c.outputDir = dir } }

// WithRelease records the release in the manifest and names the directory.
func WithRelease(r ReleaseInfo) Option { return func(c *config) { c.release = r } }

// WithSecrets makes Create save the release's Secrets as secrets.json (0600).
func WithSecrets(f SecretsFunc) Option { return func(c *config) { c.secrets = f } }

// WithCompression selects the codec and level applied on our side (Create).
func WithCompression(codec string, level int) Option {
	return func(c *config) { c.compression = Compression{Codec: codec, Level: level} }
}

// WithDumpCompression passes --compress=v to pg_dump (Create). Default "0"
// with the zstd codec (we compress), pg_dump's default with codec none.
func WithDumpCompression(v string) Option { return func(c *config) { c.dumpCompression = v } }

// WithDumpArgs adds pg_dump flags (Create), e.g. --exclude-table-data=x.
func WithDumpArgs(args ...string) Option {
	return func(c *config) { c.dumpArgs = append(c.dumpArgs, args...) }
}

// WithRestoreArgs adds pg_restore flags (Restore).
func WithRestoreArgs(args ...string) Option {
	return func(c *config) { c.restoreArgs = append(c.restoreArgs, args...) }
}

// WithLogger sets the logger (all). Nothing secret is ever logged.
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

// WithProgress is called with the bytes pg_dump produced so far (Create).
// It runs on the streaming path: a slow callback slows the dump.
func WithProgress(f func(rawBytes int64)) Option { return func(c *config) { c.progress = f } }

// WithCleanupRegistry hands Create's removal of its unfinished directory to register, for a
// caller that may end the process before Create returns (a second Ctrl-C exits at once): it
// runs the registered cleanups on its way out. Create unregisters when it returns.
func WithCleanupRegistry(register func(cleanup func()) (unregister func())) Option {
	return func(c *config) { c.registerCleanup = register }
}

// WithClock replaces time.Now (Create), for tests.
func WithClock(now func() time.Time) Option { return func(c *config) { c.now = now } }

// WithToolsDir runs the local pg_restore used by Verify from dir.
func WithToolsDir(dir string) Option { return func(c *config) { c.toolsDir = dir } }

// WithVerifyTarget lets Verify run pg_restore on t (e.g. the database pod,
// whose client matches the server) when the local one is missing or too
// old for the dump. Restore sets it to its target.
func WithVerifyTarget(t Target) Option { return func(c *config) { c.verifyTarget = t } }

// WithFullCheck makes Verify also read every data block (pg_restore into
// /dev/null), not only the table of contents.
func WithFullCheck() Option { return func(c *config) { c.full = true } }

// WithScaler scales the database writers down during Restore.
func WithScaler(s Scaler) Option { return func(c *config) { c.scaler = s } }

// WithRunningAppVersion is the app version now deployed: Restore refuses a
// backup taken from a newer one unless WithForce.
func WithRunningAppVersion(v string) Option { return func(c *config) { c.runningApp = v } }

// WithForce lets Restore accept a backup from a newer app version, or from another release
// or namespace than WithTargetRelease's.
func WithForce() Option { return func(c *config) { c.force = true } }

// WithTargetRelease names the release and namespace Restore writes into: a backup whose
// manifest names others is refused (ErrOtherRelease) unless WithForce.
func WithTargetRelease(name, namespace string) Option {
	return func(c *config) { c.targetRelease = ReleaseInfo{Name: name, Namespace: namespace} }
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
