package main

// Shared pieces for every command: flag groups, loading the inputs (chart + profile + values),
// the cluster settings, the command context with signal handling, the debug log and the exit
// codes. Commands are thin: they call these helpers and an installer/ package.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"
	"helm.sh/helm/v3/pkg/chart"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/kube"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/output"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/profile"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/redact"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/release"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/render"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/values"
)

// Exit codes (stable, documented in README.md).
const (
	ExitOK          = 0   // success
	ExitError       = 1   // any error (bad values, cluster failure, ...)
	ExitUsage       = 2   // bad command line: unknown flag, missing argument, bad -o
	ExitCheckFailed = 3   // a preflight check failed (fatal or error, not ignored)
	ExitWarnings    = 4   // only warnings, and --strict was given
	ExitInterrupted = 130 // second Ctrl-C
)

// exitError carries an exit code through urfave/cli (it implements cli.ExitCoder).
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit code %d", e.code)
	}
	return e.err.Error()
}
func (e *exitError) Unwrap() error { return e.err }
func (e *exitError) ExitCode() int { return e.code }

// withExit wraps err with an exit code; nil stays nil.
func withExit(code int, err error) error {
	if err == nil {
		return nil
	}
	return &exitError{code: code, err: err}
}

// usageErrorf is a command-line mistake: exit 2.
func usageErrorf(format string, a ...any) error {
	return &exitError{code: ExitUsage, err: fmt.Errorf(format, a...)}
}

// silentExit ends the command with a code and no further message (results were already printed).
func silentExit(code int) error { return &exitError{code: code} }

// exitCode maps any error returned by the App to the process exit code.
func exitCode(err error) int {
	if err == nil {
		return ExitOK
	}
	var ec cli.ExitCoder
	if errors.As(err, &ec) {
		return ec.ExitCode()
	}
	return ExitError
}

// Flag names, shared so other commands read them the same way.
const (
	flagKubeconfig  = "kubeconfig"
	flagContext     = "context"
	flagNamespace   = "namespace"
	flagRelease     = "release"
	flagDebugLog    = "debug-log"
	flagProfile     = "profile"
	flagValues      = "values"
	flagSet         = "set"
	flagSetString   = "set-string"
	flagSetFile     = "set-file"
	flagChart       = "chart"
	flagOutput      = "output"
	flagStrict      = "strict"
	flagIgnore      = "ignore"
	defaultRelease  = "polyaxon"
	defaultProfile  = profile.Default // "production": install and render default to it
	envDebugLogFile = "POLYAXON_DEPLOY_DEBUG_LOG"
)

// clusterFlags follow kubectl. They are defined on each command (not on the App) so they can be
// written after the command name, as with kubectl: `polyaxon-deploy check -n ml --context prod`.
func clusterFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: flagKubeconfig, Usage: "path to the kubeconfig file (default: $KUBECONFIG or ~/.kube/config)", Category: "Cluster"},
		&cli.StringFlag{Name: flagContext, Usage: "kubeconfig context to use (default: the current context)", Category: "Cluster"},
		&cli.StringFlag{Name: flagNamespace, Aliases: []string{"n"}, Value: kube.DefaultNamespace, Usage: "namespace of the release", Category: "Cluster"},
		&cli.StringFlag{Name: flagRelease, Value: defaultRelease, Usage: "Helm release name", Category: "Cluster"},
		debugLogFlag(),
	}
}

func debugLogFlag() cli.Flag {
	return &cli.StringFlag{Name: flagDebugLog, Usage: "write a debug log to `FILE` (default: kept in memory and written to a temp file only on failure; the path is printed)", EnvVars: []string{envDebugLogFile}, Category: "Output"}
}

// inputFlags choose the chart, the profile and the values layered on top of it.
// Layering, last wins: chart defaults < profile < each -f in order < --set < --set-string < --set-file.
func inputFlags() []cli.Flag {
	return append([]cli.Flag{
		&cli.StringFlag{Name: flagProfile, Aliases: []string{"p"}, Value: defaultProfile, Usage: "installer profile (" + strings.Join(profile.Names(), ", ") + ") or a profile file path", Category: "Input"},
		&cli.StringSliceFlag{Name: flagValues, Aliases: []string{"f"}, Usage: "values file, repeatable; later files win", Category: "Input"},
		&cli.StringSliceFlag{Name: flagSet, Usage: "set a value (a.b=c, list: a={x,y}, index: a[0].b=c), repeatable", Category: "Input"},
		&cli.StringSliceFlag{Name: flagSetString, Usage: "like --set but the value is always a string", Category: "Input"},
		&cli.StringSliceFlag{Name: flagSetFile, Usage: "set a value from a file's content (key=path)", Category: "Input"},
		&cli.StringFlag{Name: flagChart, Usage: chartUsage, Category: "Input"},
	}, append(officialValuesFlags(), chartSourceFlags()...)...)
}

// outputFlags: -o selects the result format on stdout; human progress always goes to stderr.
func outputFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: flagOutput, Aliases: []string{"o"}, Value: string(output.FormatTable), Usage: "result format: table, json or yaml", Category: "Output"},
	}
}

// checkFlags tune how preflight results end the command.
func checkFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringSliceFlag{Name: flagIgnore, Usage: "demote a failing check `ID` to a warning (still printed); repeatable; 'all' ignores every check", Category: "Checks"},
		&cli.BoolFlag{Name: flagStrict, Usage: "exit 4 when checks pass with warnings", Category: "Checks"},
	}
}

// listFlag returns a repeatable flag whose values are names (check IDs, label keys, template
// paths), accepting commas too (--ignore a,b): the App does not split slices itself, so that
// --set and -f reach Helm's parser whole.
func listFlag(c *cli.Context, name string) []string {
	var out []string
	for _, v := range c.StringSlice(name) {
		for _, s := range strings.Split(v, ",") {
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, s)
			}
		}
	}
	return out
}

// joinFlags concatenates flag groups for a command definition.
func joinFlags(groups ...[]cli.Flag) []cli.Flag {
	var out []cli.Flag
	for _, g := range groups {
		out = append(out, g...)
	}
	return out
}

// inputs is what a command needs to render the release.
type inputs struct {
	Chart       *chart.Chart
	ChartSource string // "embedded", the --chart path, or the pulled oci:// reference
	Profile     *profile.Profile
	// ValueOptions are the user's inputs as given (files, --set...), stored so an upgrade can
	// re-render from profile + inputs instead of Helm's --reuse-values.
	ValueOptions values.Options
	// Values = profile < files < --set: what is handed to Helm (chart defaults come from the chart).
	Values map[string]any
	// Warnings from legacy input migration, to be shown to the user.
	Warnings []values.Warning
}

// loadInputs loads the chart (embedded or --chart), the profile and the layered user values.
// Errors say what to fix (unknown profile lists the known ones; a missing file names it).
func loadInputs(c *cli.Context) (*inputs, error) {
	in := &inputs{}
	ch, err := loadChart(c)
	if err != nil {
		return nil, err
	}
	in.Chart, in.ChartSource = ch.Chart, ch.Source
	in.Profile, err = profile.Load(c.String(flagProfile))
	if err != nil {
		return nil, err
	}
	in.ValueOptions = values.Options{
		ValueFiles:   c.StringSlice(flagValues),
		Values:       c.StringSlice(flagSet),
		StringValues: c.StringSlice(flagSetString),
		FileValues:   c.StringSlice(flagSetFile),
	}
	if err := checkSetArgs(c); err != nil {
		return nil, err
	}
	noteValueSecrets(c, in.Profile.Values)
	noteOptionSecrets(c, in.ValueOptions)
	in.Values, in.Warnings, err = buildWithOfficial(c, func(o values.Options) (map[string]any, []values.Warning, error) {
		return values.Build(in.Profile.Name, in.Profile.Values, o)
	}, in.ValueOptions)
	if err != nil {
		return nil, err
	}
	if f := c.String(flagFromOfficial); f != "" {
		in.ValueOptions.ValueFiles = append([]string{f + " (converted from the official chart)"}, in.ValueOptions.ValueFiles...)
	}
	noteValueSecrets(c, in.Values)
	for _, w := range in.Warnings {
		debugf(c, "values warning: %s", w)
	}
	return in, nil
}

// checkSetArgs refuses --set/--set-string/--set-file arguments that strvals would silently
// ignore (empty, or a pair without a key): a usage error, before anything is read.
func checkSetArgs(c *cli.Context) error {
	for _, flag := range []string{flagSet, flagSetString} {
		for _, a := range c.StringSlice(flag) {
			if _, err := values.SplitSetArg(a); err != nil {
				return usageErrorf("--%s %q: %v", flag, values.RedactSetArg(a), err)
			}
		}
	}
	_, err := setFilePairs(c.StringSlice(flagSetFile))
	return err
}

// warnInputs prints legacy-input warnings as human progress on stderr.
func warnInputs(c *cli.Context, in *inputs) {
	for _, w := range in.Warnings {
		progress(c).Warn(w.String())
	}
}

// releaseOptions returns the render options for this command's release and namespace.
func releaseOptions(c *cli.Context) render.Options {
	return render.Options{ReleaseName: c.String(flagRelease), Namespace: c.String(flagNamespace)}
}

// kubeSettings returns the single settings object (kubeconfig, context, namespace) shared by
// client-go and the Helm SDK for this command. Nothing is read from disk until a client is asked for.
func kubeSettings(c *cli.Context) *kube.Settings {
	e := envOf(c)
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.settings == nil {
		if e.newSettings != nil {
			e.settings = e.newSettings(c)
		} else {
			e.settings = kube.NewSettings(c.String(flagKubeconfig), c.String(flagContext), c.String(flagNamespace))
		}
	}
	return e.settings
}

// env is the per-process state hung on cli.App.Metadata: writers, debug log, settings.
type env struct {
	// stdout and stderr mask the run's secrets (scrub); rawStdout is for render's manifests,
	// whose Secrets must keep their values.
	stdout, stderr io.Writer
	rawStdout      io.Writer
	scrub          *redact.Scrubber

	mu          sync.Mutex
	settings    *kube.Settings
	newSettings func(*cli.Context) *kube.Settings // test hook: inject fake/real clients
	// newReleaseClient is a test hook: a release client on offline Helm fixtures.
	newReleaseClient func(*cli.Context, ...release.Option) (*release.Client, error)
	logStarted       bool
	logPath          string
	logFile          *os.File
	logErr           error
	logBuf           bytes.Buffer
	progress         *output.Progress
	// printer and command let finish print an error result with -o json|yaml when the
	// command failed before printing one.
	printer *output.Printer
	command string
	// exitCleanups run when a second Ctrl-C exits at once, before deferred cleanups could
	// (an unfinished backup directory); exit is os.Exit (tests replace it).
	exitCleanups map[int]func()
	nextCleanup  int
	exit         func(code int)
}

const envKey = "polyaxon-deploy.env"

// newEnv wraps the process's streams with the run's Scrubber.
func newEnv(stdout, stderr io.Writer) *env {
	s := redact.NewScrubber()
	return &env{stdout: s.Writer(stdout), stderr: s.Writer(stderr), rawStdout: stdout, scrub: s, exit: os.Exit}
}

// registerExitCleanup adds fn to what a second Ctrl-C runs before exiting; the returned
// function removes it (call it when fn's work is done or undone another way).
func registerExitCleanup(c *cli.Context, fn func()) (unregister func()) {
	e := envOf(c)
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.exitCleanups == nil {
		e.exitCleanups = map[int]func(){}
	}
	id := e.nextCleanup
	e.nextCleanup++
	e.exitCleanups[id] = fn
	return func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		delete(e.exitCleanups, id)
	}
}

// exitNow runs the registered cleanups (each protected from the others' panics) and exits.
func exitNow(c *cli.Context, code int) {
	e := envOf(c)
	e.mu.Lock()
	fns := make([]func(), 0, len(e.exitCleanups))
	for _, fn := range e.exitCleanups {
		fns = append(fns, fn)
	}
	e.mu.Unlock()
	for _, fn := range fns {
		func() {
			defer func() { _ = recover() }()
			fn()
		}()
	}
	e.exit(code)
}

func envOf(c *cli.Context) *env {
	if e, ok := c.App.Metadata[envKey].(*env); ok {
		return e
	}
	e := newEnv(c.App.Writer, c.App.ErrWriter)
	if c.App.Metadata == nil {
		c.App.Metadata = map[string]any{}
	}
	c.App.Metadata[envKey] = e
	return e
}

// stdout is where results go; stderr is for humans. Both mask the run's secrets.
func stdout(c *cli.Context) io.Writer { return envOf(c).stdout }

// rawStdout is stdout without masking: only for rendered manifests (Secrets keep their values;
// everything else render prints is masked by path first).
func rawStdout(c *cli.Context) io.Writer { return envOf(c).rawStdout }
func stderr(c *cli.Context) io.Writer    { return envOf(c).stderr }

// progress is the human progress printer on stderr.
func progress(c *cli.Context) *output.Progress {
	e := envOf(c)
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.progress == nil {
		e.progress = output.NewProgress(e.stderr)
	}
	return e.progress
}

// printer validates -o and returns the result printer on stdout (a bad -o is a usage error).
func printer(c *cli.Context) (*output.Printer, error) {
	f, err := output.ParseFormat(c.String(flagOutput))
	if err != nil {
		return nil, withExit(ExitUsage, err)
	}
	return printerOn(c, stdout(c), f), nil
}

// printerOn makes the command's result printer write to w (render: the unmasked stdout).
func printerOn(c *cli.Context, w io.Writer, f output.Format) *output.Printer {
	p := output.NewPrinter(w, f)
	e := envOf(c)
	e.mu.Lock()
	e.printer, e.command = p, c.Command.FullName()
	e.mu.Unlock()
	return p
}

// debugf records a debug line. With --debug-log FILE lines go straight to FILE; otherwise
// they are kept in memory and written to a temp file only if the command fails (finish prints
// the path), so successful runs leave nothing behind.
func debugf(c *cli.Context, format string, a ...any) {
	e := envOf(c)
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.logStarted {
		e.logStarted = true
		if path := c.String(flagDebugLog); path != "" {
			e.logPath = path
			e.logFile, e.logErr = os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		}
		e.writeLog(fmt.Sprintf("%s polyaxon-deploy %s: %s\n", time.Now().Format(time.RFC3339), version, strings.Join(redactArgs(os.Args), " ")))
	}
	e.writeLog(fmt.Sprintf("%s "+format+"\n", append([]any{time.Now().Format("15:04:05.000")}, a...)...))
}

// maxLogBuffer bounds the in-memory log (Helm can be chatty); the newest lines are kept.
const maxLogBuffer = 4 << 20

func (e *env) writeLog(line string) {
	line = e.scrub.String(line)
	if e.logFile != nil {
		_, _ = e.logFile.WriteString(line)
		return
	}
	e.logBuf.WriteString(line)
	if e.logBuf.Len() > maxLogBuffer {
		b := e.logBuf.Bytes()
		rest := append([]byte("... (earlier lines dropped)\n"), b[len(b)-maxLogBuffer/2:]...)
		e.logBuf.Reset()
		e.logBuf.Write(rest)
	}
}

// helmLog adapts debugf to the Helm SDK's log function.
func helmLog(c *cli.Context) func(string, ...any) {
	return func(format string, a ...any) { debugf(c, "helm: "+format, a...) }
}

// flushDebugLog makes sure the log is on disk and returns its path ("" if nothing was logged
// or it could not be written).
func (e *env) flushDebugLog() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.logFile != nil {
		return e.logPath
	}
	if e.logErr != nil || e.logBuf.Len() == 0 {
		return ""
	}
	f, err := os.CreateTemp("", "polyaxon-deploy-*.log")
	if err != nil {
		return ""
	}
	defer f.Close()
	if _, err := f.Write(e.logBuf.Bytes()); err != nil {
		return ""
	}
	e.logPath = f.Name()
	return e.logPath
}

func (e *env) close() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.logFile != nil {
		_ = e.logFile.Close()
	}
}

// commandContext returns a context cancelled on the first SIGINT/SIGTERM (so Helm actions end
// their release as failed, not pending-*); a second signal exits 130 at once, after the
// registered exit cleanups (registerExitCleanup).
// Call stop when the command returns.
func commandContext(c *cli.Context) (ctx context.Context, stop func()) {
	parent := c.Context
	if parent == nil {
		parent = context.Background()
	}
	ctx, cancel := context.WithCancel(parent)
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case s := <-sigs:
			progress(c).Warn(fmt.Sprintf("received %s: cancelling (press Ctrl-C again to exit now)", s))
			debugf(c, "signal %s: cancelling", s)
			cancel()
		case <-done:
			return
		}
		select {
		case <-sigs:
			debugf(c, "second signal: exit %d", ExitInterrupted)
			exitNow(c, ExitInterrupted)
		case <-done:
		}
	}()
	return ctx, func() {
		signal.Stop(sigs)
		close(done)
		cancel()
	}
}
