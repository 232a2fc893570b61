package release_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/release"
)

// An option compiles only where it applies: its type is of the option types of exactly the
// actions that read it (a type assertion fails where an argument would not compile).
func TestOptionsApplyOnlyWhereTheyAreRead(t *testing.T) {
	applies := func(opt any) []string {
		var out []string
		if _, ok := opt.(release.InstallOption); ok {
			out = append(out, "install")
		}
		if _, ok := opt.(release.UpgradeOption); ok {
			out = append(out, "upgrade")
		}
		if _, ok := opt.(release.RollbackOption); ok {
			out = append(out, "rollback")
		}
		if _, ok := opt.(release.UninstallOption); ok {
			out = append(out, "uninstall")
		}
		if _, ok := opt.(release.RecoverOption); ok {
			out = append(out, "recover")
		}
		return out
	}
	all := []string{"install", "upgrade", "rollback", "uninstall", "recover"}
	assert.Equal(t, all, applies(release.WithTimeout(0)))
	assert.Equal(t, all, applies(release.WithDryRun()))
	assert.Equal(t, []string{"install", "upgrade", "rollback", "uninstall"}, applies(release.WithDescription("")))
	assert.Equal(t, []string{"install", "upgrade"}, applies(release.WithInputs(release.Inputs{})))
	assert.Equal(t, []string{"install"}, applies(release.WithPodSecurity(release.PodSecurity{})))
	assert.Equal(t, []string{"install"}, applies(release.WithKeepOnFailure()))
	assert.Equal(t, []string{"rollback", "recover"}, applies(release.WithRevisionPodSecurity(nil)))
	assert.Equal(t, []string{"upgrade"}, applies(release.WithoutRollback()))
	assert.Equal(t, []string{"uninstall"}, applies(release.WithPurgeData()))
}
