// Command polyaxon-deploy installs and operates Polyaxon on Kubernetes.
// This file only wires commands; the work lives in installer/ packages.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/output"
)

func main() {
	os.Exit(run(context.Background(), os.Args, os.Stdout, os.Stderr))
}

// run executes the CLI in-process and returns the exit code (tests call it directly).
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	app := newApp(stdout, stderr)
	err := app.RunContext(ctx, args)
	return finish(app, err)
}

// commands lists every command, in help order.
func commands() []*cli.Command {
	return []*cli.Command{
		renderCommand(),
		checkCommand(),
		planCommand(),
		installCommand(),
		upgradeCommand(),
		statusCommand(),
		historyCommand(),
		rollbackCommand(),
		uninstallCommand(),
		recoverCommand(),
		backupCommand(),
		restoreCommand(),
		convertValuesCommand(),
		adoptCommand(),
		exporterCommand(),
		versionCommand(),
		completionCommand(),
	}
}

func newApp(stdout, stderr io.Writer) *cli.App {
	e := newEnv(stdout, stderr)
	stdout, stderr = e.stdout, e.stderr
	app := &cli.App{
		Name:                 "polyaxon-deploy",
		Usage:                "install, check and upgrade Polyaxon on Kubernetes",
		Version:              version,
		HideVersion:          true, // `polyaxon-deploy version` says more
		Writer:               stdout,
		ErrWriter:            stderr,
		EnableBashCompletion: true,
		// --set, -f and --set-file reach Helm's strvals parser whole, as with helm: urfave's
		// comma splitting would break lists ({a,b}) and escaped commas.
		DisableSliceFlagSeparator: true,
		Commands:                  commands(),
		// urfave would call os.Exit itself; run() maps errors to exit codes instead.
		ExitErrHandler: func(*cli.Context, error) {},
		OnUsageError:   onUsageError,
		CommandNotFound: func(c *cli.Context, name string) {
			fmt.Fprintf(stderr, "Error: unknown command %q; run 'polyaxon-deploy help'\n", name)
			c.App.Metadata["unknown-command"] = true
		},
		Metadata: map[string]any{},
	}
	app.Metadata[envKey] = e
	for _, cmd := range app.Commands {
		acceptClusterFlags(cmd)
		setUsageHandler(cmd)
	}
	return app
}

// setUsageHandler maps flag errors to exit 2 and starts the debug log of every command.
func setUsageHandler(cmd *cli.Command) {
	if cmd.OnUsageError == nil {
		cmd.OnUsageError = onUsageError
	}
	before := cmd.Before
	cmd.Before = func(c *cli.Context) error {
		debugf(c, "command %s %v", c.Command.FullName(), c.Args().Slice())
		// Libraries (Helm's values coalescing among them) write warnings with the standard
		// logger; they belong in the debug log, not between our progress lines.
		log.SetFlags(0)
		log.SetOutput(debugWriter{c, "log"})
		if before != nil {
			return before(c)
		}
		return nil
	}
	for _, sub := range cmd.Subcommands {
		setUsageHandler(sub)
	}
}

func onUsageError(c *cli.Context, err error, _ bool) error {
	return withExit(ExitUsage, fmt.Errorf("%w (see --help)", err))
}

// finish prints the error (with the debug log path) and returns the exit code. With -o json|yaml
// a failed command that printed no result prints an error result, so scripts always get one.
func finish(app *cli.App, err error) int {
	e, _ := app.Metadata[envKey].(*env)
	defer e.close()
	if err == nil && app.Metadata["unknown-command"] == true {
		return ExitUsage
	}
	code := exitCode(err)
	if code == ExitOK {
		return code
	}
	logPath := ""
	if code != ExitUsage {
		logPath = e.flushDebugLog()
	}
	// With -o json|yaml these too are events, like the rest of stderr.
	say := func(format string, args ...any) { fmt.Fprintf(e.stderr, format+"\n", args...) }
	if e.progress != nil && e.progress.Events() {
		say = func(format string, args ...any) { e.progress.Fail(fmt.Sprintf(format, args...)) }
	}
	var ee *exitError
	if !(errors.As(err, &ee) && ee.err == nil) {
		say("Error: %s", e.scrub.String(err.Error()))
	}
	if logPath != "" {
		say("Debug log: %s", logPath)
	}
	if p := e.printer; p != nil && p.Structured() && !p.Printed() {
		r := output.NewResult(e.command, output.StatusError).WithError(err)
		r.Error = e.scrub.String(r.Error)
		if code == ExitCheckFailed {
			r.Status = output.StatusFailed
		}
		r.DebugLog = logPath
		_ = p.Print(r)
	}
	return code
}
