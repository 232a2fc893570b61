package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/urfave/cli/v2"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/action"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/phase"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/release"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/upgrade"
)

// withInputFlags parses args with the input flags and hands the context to fn.
func withInputFlags(t *testing.T, args []string, fn func(c *cli.Context) error) error {
	t.Helper()
	var out, errb bytes.Buffer
	app := newApp(&out, &errb)
	app.Commands = []*cli.Command{{Name: "x", Flags: joinFlags(clusterFlags(), inputFlags()), Action: fn}}
	return app.RunContext(context.Background(), append([]string{"polyaxon-deploy", "x"}, args...))
}

// The input flags become the action's Given as given: paths, not contents; the profile only
// when set, unless the command always takes one (install: its default).
func TestGivenOfTheFlags(t *testing.T) {
	args := []string{"-f", "a.yaml", "-f", "b.yaml", "--set", "x=1", "--set-string", "y=2", "--set-file", "z=c.txt", "--chart", "./chart", "--from-official-values", "old.yaml", "--allow-unmapped"}
	require.NoError(t, withInputFlags(t, args, func(c *cli.Context) error {
		g := givenOf(c, false)
		assert.Empty(t, g.Profile, "an upgrade without --profile keeps the stored one")
		assert.Equal(t, []string{"a.yaml", "b.yaml"}, g.Values)
		assert.Equal(t, []string{"x=1"}, g.Set)
		assert.Equal(t, []string{"y=2"}, g.SetString)
		assert.Equal(t, []string{"z=c.txt"}, g.SetFile)
		assert.Equal(t, "./chart", g.Chart.Ref)
		assert.Equal(t, action.Official{File: "old.yaml", AllowUnmapped: true, Version: c.String(flagOfficialVersion)}, g.Official)
		assert.Equal(t, defaultProfile, givenOf(c, true).Profile)
		return nil
	}))
	require.NoError(t, withInputFlags(t, []string{"--profile", "development"}, func(c *cli.Context) error {
		assert.Equal(t, "development", givenOf(c, false).Profile)
		return nil
	}))
}

func TestReleaseExitCodes(t *testing.T) {
	assert.Nil(t, releaseExit(nil))
	assert.Equal(t, ExitCheckFailed, exitCode(releaseExit(fmt.Errorf("wrapped: %w", &action.ChecksFailedError{}))))
	assert.Equal(t, ExitUsage, exitCode(releaseExit(&upgrade.PolicyError{Msg: "x"})))
	assert.Equal(t, ExitInterrupted, exitCode(releaseExit(&release.InterruptedError{Op: "upgrade", Err: context.Canceled})))
	assert.Equal(t, ExitInterrupted, exitCode(releaseExit(&phase.Error{Phase: "apply", Err: context.Canceled})))
	assert.Equal(t, ExitError, exitCode(releaseExit(errors.New("boom"))))
}

// Each release command parses the flags a user gives it into the values its action reads
// (the flag names the actions use), refuses a misspelt flag as a usage error, and has help.
func TestReleaseCommandsParse(t *testing.T) {
	type seen = map[string]any
	read := func(c *cli.Context) seen {
		out := seen{"namespace": c.String(flagNamespace), "release": c.String(flagRelease), "args": c.Args().Slice()}
		for _, f := range []string{flagDryRun, flagKeepFailed, flagSkipBackup, flagYes, flagRestoreOnFailure, flagForce,
			flagAllowPGMajor, flagMovePostgres, flagResetValues, flagPurgeData} {
			if c.IsSet(f) {
				out[f] = c.Bool(f)
			}
		}
		if c.IsSet(flagTimeout) {
			out[flagTimeout] = c.Duration(flagTimeout)
		}
		if c.IsSet(flagMax) {
			out[flagMax] = c.Int(flagMax)
		}
		if c.IsSet(flagBackupDir) {
			out[flagBackupDir] = c.String(flagBackupDir)
		}
		if c.IsSet("profile") {
			out["profile"] = c.String("profile")
		}
		return out
	}
	common := []string{"-n", "ml", "--release", "px"}
	for _, tc := range []struct {
		cmd  *cli.Command
		args []string
		want seen
	}{
		{installCommand(), []string{"--profile", "development", "--dry-run", "--keep-failed", "--timeout", "3m"},
			seen{"profile": "development", flagDryRun: true, flagKeepFailed: true, flagTimeout: 3 * time.Minute}},
		{upgradeCommand(), []string{"--skip-backup", "--yes", "--restore-on-failure", "--force", "--allow-postgres-major-upgrade",
			"--move-postgres", "--reset-values", "--backup-dir", "/srv/b", "--timeout", "90s"},
			seen{flagSkipBackup: true, flagYes: true, flagRestoreOnFailure: true, flagForce: true, flagAllowPGMajor: true, flagMovePostgres: true,
				flagResetValues: true, flagBackupDir: "/srv/b", flagTimeout: 90 * time.Second}},
		{statusCommand(), nil, seen{}},
		{historyCommand(), []string{"--max", "3"}, seen{flagMax: 3}},
		{rollbackCommand(), []string{"--timeout", "1m", "4"}, seen{flagTimeout: time.Minute, "args": []string{"4"}}},
		{uninstallCommand(), []string{"--purge-data", "-y"}, seen{flagPurgeData: true, flagYes: true}},
		{recoverCommand(), []string{"--yes", "--timeout", "2m"}, seen{flagYes: true, flagTimeout: 2 * time.Minute}},
	} {
		t.Run(tc.cmd.Name, func(t *testing.T) {
			run := func(args ...string) (int, string, seen) {
				var out, errb bytes.Buffer
				app := newApp(&out, &errb)
				var got seen
				cmd := *tc.cmd
				cmd.Action = func(c *cli.Context) error { got = read(c); return nil }
				app.Commands = []*cli.Command{&cmd}
				setUsageHandler(&cmd)
				err := app.RunContext(context.Background(), append([]string{"polyaxon-deploy", cmd.Name}, args...))
				return finish(app, err), out.String() + errb.String(), got
			}
			code, out, got := run(append(append([]string{}, common...), tc.args...)...)
			require.Equal(t, ExitOK, code, out)
			want := seen{"namespace": "ml", "release": "px", "args": []string{}}
			for k, v := range tc.want {
				want[k] = v
			}
			if len(got["args"].([]string)) == 0 {
				got["args"] = []string{}
			}
			assert.Equal(t, want, got)

			code, out, got = run("--no-such-flag")
			assert.Equal(t, ExitUsage, code, out)
			assert.Nil(t, got, "the action does not run")

			code, out, _ = run("--help")
			require.Equal(t, ExitOK, code, out)
			assert.Contains(t, out, "polyaxon-deploy "+tc.cmd.Name)
		})
	}
}

func TestUpgradeBackupHonoursTheBackupFlags(t *testing.T) {
	var out, errb bytes.Buffer
	app := newApp(&out, &errb)
	cmd := upgradeCommand()
	var b action.Database
	cmd.Action = func(c *cli.Context) (err error) { b, err = databaseOf(c); return err }
	app.Commands = []*cli.Command{cmd}
	require.NoError(t, app.RunContext(context.Background(),
		[]string{"polyaxon-deploy", "upgrade", "--backup-dir", "/srv/backups", "--pg-bin-dir", "/usr/lib/postgresql/17/bin"}), errb.String())
	assert.Equal(t, "/srv/backups", b.Dir, "the pre-upgrade backup goes where --dir says")
	assert.Equal(t, "/usr/lib/postgresql/17/bin", b.ToolsDir, "verify and restore use the --pg-bin-dir tools")
}
