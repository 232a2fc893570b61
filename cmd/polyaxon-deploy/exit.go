package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/action"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/release"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/upgrade"
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

// releaseExit maps the errors of actions to exit codes: failed checks 3, a refused option
// combination 2, an interruption 130, anything else 1.
func releaseExit(err error) error {
	if err == nil {
		return nil
	}
	var ce *action.ChecksFailedError
	var ue *action.UsageError
	var pe *upgrade.PolicyError
	switch {
	case errors.As(err, &ce):
		return withExit(ExitCheckFailed, err)
	case errors.As(err, &ue), errors.As(err, &pe):
		return withExit(ExitUsage, err)
	case release.IsInterrupted(err), errors.Is(err, context.Canceled):
		return withExit(ExitInterrupted, err)
	}
	return err
}

// usageExit maps a refused combination of options (*action.UsageError) to exit 2, for the
// commands whose other errors are plain (exit 1).
func usageExit(err error) error {
	var ue *action.UsageError
	if errors.As(err, &ue) {
		return withExit(ExitUsage, err)
	}
	return err
}
