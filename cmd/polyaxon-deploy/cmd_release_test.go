package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/urfave/cli/v2"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/action"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/phase"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/release"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/upgrade"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/values"
)

// withInputFlags parses args with the input flags and hands the context to fn.
func withInputFlags(t *testing.T, args []string, fn func(c *cli.Context) error) error {
	t.Helper()
	var out, errb bytes.Buffer
	app := newApp(&out, &errb)
	app.Commands = []*cli.Command{{Name: "x", Flags: joinFlags(clusterFlags(), inputFlags()), Action: fn}}
	return app.RunContext(context.Background(), append([]string{"polyaxon-deploy", "x"}, args...))
}

func TestStoredInputsRebuildWithoutTheOriginalFiles(t *testing.T) {
	f := writeFile(t, "prod.yaml", "gateway:\n  replicas: 4\n")
	var raw release.Inputs
	require.NoError(t, withInputFlags(t, []string{"--profile", "development", "-f", f, "--set", "gateway.pdb.enabled=true"}, func(c *cli.Context) error {
		var err error
		raw, err = readInputs(c, true)
		return err
	}))
	assert.Equal(t, "development", raw.Profile)
	require.Len(t, raw.ValuesFiles, 1)
	assert.Equal(t, f, raw.ValuesFiles[0].Name)
	assert.Equal(t, "gateway:\n  replicas: 4\n", raw.ValuesFiles[0].Content)
	require.NoError(t, os.Remove(f)) // months later: the file is gone

	// An upgrade with one more --set: the stored file still applies, the new --set on top.
	require.NoError(t, withInputFlags(t, []string{"--set", "gateway.replicas=5"}, func(c *cli.Context) error {
		now, err := readInputs(c, false)
		if err != nil {
			return err
		}
		assert.Empty(t, now.Profile, "an upgrade without --profile keeps the stored one")
		merged := raw.Layer(now, false)
		in, err := buildInputs(c, merged)
		if err != nil {
			return err
		}
		assert.Equal(t, "development", in.Profile.Name)
		v, _ := values.Lookup(in.Values, "gateway.replicas")
		assert.EqualValues(t, 5, v)
		v, _ = values.Lookup(in.Values, "gateway.pdb.enabled")
		assert.Equal(t, true, v)
		assert.Equal(t, f, in.Given.ValuesFiles[0].Name, "messages and output name the user's file")

		reset := raw.Layer(now, true)
		in2, err := buildInputs(c, reset)
		if err != nil {
			return err
		}
		v, _ = values.Lookup(in2.Values, "gateway.pdb.enabled")
		assert.NotEqual(t, true, v, "--reset-values drops the stored --set")
		return nil
	}))
}

func TestStoredInputErrorsNameTheOriginalFile(t *testing.T) {
	raw := release.Inputs{Profile: "production", ValuesFiles: []release.ValuesFile{{Name: "/home/me/broken.yaml", Content: "gateway: [\n"}}}
	err := withInputFlags(t, nil, func(c *cli.Context) error {
		_, err := buildInputs(c, raw)
		return err
	})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "/home/me/broken.yaml")
	assert.NotContains(t, err.Error(), "polyaxon-deploy-inputs-", "no temporary path leaks into messages")
}

func TestReadInputsMissingFileNamesTheFix(t *testing.T) {
	err := withInputFlags(t, []string{"-f", "/nonexistent/values.yaml"}, func(c *cli.Context) error {
		_, err := readInputs(c, true)
		return err
	})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "/nonexistent/values.yaml")
	assert.Contains(t, err.Error(), "fix")
}

func TestReleaseExitCodes(t *testing.T) {
	assert.Nil(t, releaseExit(nil))
	assert.Equal(t, ExitCheckFailed, exitCode(releaseExit(fmt.Errorf("wrapped: %w", &action.ChecksFailedError{}))))
	assert.Equal(t, ExitUsage, exitCode(releaseExit(&upgrade.PolicyError{Msg: "x"})))
	assert.Equal(t, ExitInterrupted, exitCode(releaseExit(&release.InterruptedError{Op: "upgrade", Err: context.Canceled})))
	assert.Equal(t, ExitInterrupted, exitCode(releaseExit(&phase.Error{Phase: "apply", Err: context.Canceled})))
	assert.Equal(t, ExitError, exitCode(releaseExit(errors.New("boom"))))
}

func TestReleaseCommandsParse(t *testing.T) {
	for _, cmd := range []*cli.Command{installCommand(), upgradeCommand(), statusCommand(), historyCommand(),
		rollbackCommand(), uninstallCommand(), recoverCommand()} {
		t.Run(cmd.Name, func(t *testing.T) {
			var out, errb bytes.Buffer
			app := newApp(&out, &errb)
			app.Commands = []*cli.Command{cmd}
			setUsageHandler(cmd)
			err := app.RunContext(context.Background(), []string{"polyaxon-deploy", cmd.Name, "--help"})
			require.NoError(t, err, errb.String())
			assert.True(t, strings.Contains(out.String(), cmd.Name), out.String())
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
