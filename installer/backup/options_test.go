package backup

import (
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
)

// An option compiles only where it applies: its type is of the option types of exactly the
// operations that read it (a type assertion fails where an argument would not compile).
func TestOptionsApplyOnlyWhereTheyAreRead(t *testing.T) {
	applies := func(opt any) []string {
		var out []string
		if _, ok := opt.(CreateOption); ok {
			out = append(out, "create")
		}
		if _, ok := opt.(VerifyOption); ok {
			out = append(out, "verify")
		}
		if _, ok := opt.(RestoreOption); ok {
			out = append(out, "restore")
		}
		return out
	}
	for _, opt := range []any{WithOutputDir(""), WithRelease(ReleaseInfo{}), WithSecrets(nil), WithCompression("", 0),
		WithDumpCompression(""), WithDumpArgs(), WithProgress(nil), WithCleanupRegistry(nil), WithClock(nil)} {
		assert.Equal(t, []string{"create"}, applies(opt), "%T", opt)
	}
	assert.Equal(t, []string{"verify"}, applies(WithVerifyTarget(nil)))
	for _, opt := range []any{WithRestoreArgs(), WithScaler(nil), WithRunningAppVersion(""), WithForce(), WithTargetRelease("", "")} {
		assert.Equal(t, []string{"restore"}, applies(opt), "%T", opt)
	}
	assert.Equal(t, []string{"verify", "restore"}, applies(WithToolsDir("")))
	assert.Equal(t, []string{"verify", "restore"}, applies(WithFullCheck()))
	assert.Equal(t, []string{"create", "verify", "restore"}, applies(WithLogger(slog.Default())))
}
