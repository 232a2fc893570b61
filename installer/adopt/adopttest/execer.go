// Package adopttest runs the database tools "in a container" without a cluster: the command
// a Target would send through `kubectl exec` runs on this machine, with the environment the
// container would have. Tests and the adopt benchmark use it with a real local PostgreSQL.
package adopttest

import (
	"context"
	"errors"
	"os"
	"os/exec"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/backup"
)

// LocalExecer runs exec commands locally with Env as the container's whole environment
// (plus PATH when Env has none).
type LocalExecer struct {
	Env map[string]string
}

var _ backup.Execer = LocalExecer{}

// exitError carries the command's exit code, as client-go's exec errors do.
type exitError struct{ code int }

func (e exitError) Error() string   { return "command terminated with non-zero exit code" }
func (e exitError) ExitStatus() int { return e.code }

func (l LocalExecer) Exec(ctx context.Context, _, _, _ string, command []string, stdio backup.Stdio) error {
	cmd := exec.CommandContext(ctx, command[0], command[1:]...)
	env := []string{}
	if _, ok := l.Env["PATH"]; !ok {
		env = append(env, "PATH="+os.Getenv("PATH"))
	}
	for k, v := range l.Env {
		env = append(env, k+"="+v)
	}
	cmd.Env = env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdio.Stdin, stdio.Stdout, stdio.Stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return exitError{code: ee.ExitCode()}
	}
	return err
}
