package main

// The per-process state of a run: its streams (masked by the run's Scrubber), cluster
// settings, debug log, result printer, and the command context with its signal handling.

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"

	"github.com/urfave/cli/v2"
	"golang.org/x/term"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/action"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/kube"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/output"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/redact"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/release"
)

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
			opts := append([]kube.Option{kube.WithAccess(accessOf(c))}, testHooks()...)
			e.settings = kube.NewSettings(c.String(flagKubeconfig), c.String(flagContext), c.String(flagNamespace), opts...)
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

// progress is the progress printer on stderr: lines for a human, or with -o json|yaml one
// JSON event per line for the script that reads the result on stdout.
func progress(c *cli.Context) *output.Progress {
	e := envOf(c)
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.progress == nil {
		if structured(c) {
			e.progress = output.NewEventProgress(e.stderr)
		} else {
			e.progress = output.NewProgress(e.stderr)
		}
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

// structured reports whether -o asks for a result for scripts (json, yaml).
func structured(c *cli.Context) bool {
	f, err := output.ParseFormat(c.String(flagOutput))
	return err == nil && f != output.FormatTable
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

// actionEnv is what the command hands the installer's actions: its progress, debug log,
// Scrubber, prompt and exit cleanups.
func actionEnv(c *cli.Context) action.Env {
	return action.Env{
		Progress:        progress(c),
		Debugf:          func(format string, args ...any) { debugf(c, format, args...) },
		Logger:          debugLogger(c),
		Secrets:         envOf(c).scrub,
		Confirm:         func(q string) (bool, error) { return confirm(c, q) },
		RegisterCleanup: func(fn func()) func() { return registerExitCleanup(c, fn) },
	}
}

// confirm asks a yes/no question on stderr; without a terminal it refuses.
func confirm(c *cli.Context, question string) (bool, error) {
	if !term.IsTerminal(int(os.Stdin.Fd())) {
		return false, usageErrorf("%s: not confirmed (no terminal): pass --yes", question)
	}
	fmt.Fprintf(stderr(c), "%s [y/N]: ", question)
	line, _ := bufio.NewReader(os.Stdin).ReadString('\n')
	answer := strings.ToLower(strings.TrimSpace(line))
	return answer == "y" || answer == "yes", nil
}
