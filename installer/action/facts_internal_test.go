package action

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/phase"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/upgrade"
)

// TestUpgradeBackupReadsThePhases: the facts record an upgrade's backup as it went: none when
// the upgrade took none (skipped, or it stopped before), failed when writing or verifying it
// failed, succeeded when both did, whatever happened to the upgrade after.
func TestUpgradeBackupReadsThePhases(t *testing.T) {
	phases := func(backup, verify string) *upgrade.Result {
		return &upgrade.Result{Phases: []phase.PhaseReport{
			{Phase: upgrade.PhaseChecks, Status: "ok"},
			{Phase: upgrade.PhaseBackup, Status: backup},
			{Phase: upgrade.PhaseVerify, Status: verify},
			{Phase: upgrade.PhaseApply, Status: "failed"},
		}}
	}
	applyFailed := errors.New("applying revision 3: timed out")
	assert.Nil(t, upgradeBackup(nil, nil))
	assert.Nil(t, upgradeBackup(phases("skipped", "skipped"), nil), "--skip-backup")
	assert.Nil(t, upgradeBackup(phases("not-run", "not-run"), applyFailed), "stopped before the backup")

	a := upgradeBackup(phases("ok", "ok"), applyFailed)
	require.NotNil(t, a)
	assert.True(t, a.Succeeded, "the backup was written and verified; the apply failing after is the upgrade's")
	assert.Empty(t, a.Error)

	verifyFailed := errors.New("verifying the backup: table runs: 3 rows, the manifest says 4\nsecond line")
	a = upgradeBackup(phases("ok", "failed"), verifyFailed)
	require.NotNil(t, a)
	assert.False(t, a.Succeeded)
	assert.Equal(t, "verifying the backup: table runs: 3 rows, the manifest says 4", a.Error, "the error's first line")
}

// TestChangedSomething: an upgrade refused by its checks is no failed upgrade in the facts (no
// alert for a typo in a value); one that backed up, migrated or applied is.
func TestChangedSomething(t *testing.T) {
	refused := &upgrade.Result{Phases: []phase.PhaseReport{
		{Phase: upgrade.PhaseLock, Status: "ok"}, {Phase: upgrade.PhaseChecks, Status: "failed"},
		{Phase: upgrade.PhaseBackup, Status: "not-run"}, {Phase: upgrade.PhaseApply, Status: "not-run"}}}
	assert.False(t, changedSomething(refused))
	assert.False(t, changedSomething(nil))
	applied := &upgrade.Result{Phases: []phase.PhaseReport{
		{Phase: upgrade.PhaseChecks, Status: "ok"}, {Phase: upgrade.PhaseBackup, Status: "skipped"},
		{Phase: upgrade.PhaseApply, Status: "failed"}}}
	assert.True(t, changedSomething(applied))
}
