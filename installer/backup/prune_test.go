package backup

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// finishedBackup writes a backup directory List reads as finished: a manifest of release
// (namespace/name) started at.
func finishedBackup(t *testing.T, parent, name, namespace, release string, at time.Time) string {
	t.Helper()
	dir := filepath.Join(parent, name)
	require.NoError(t, os.Mkdir(dir, 0o700))
	m := Manifest{FormatVersion: FormatVersion, Release: release, Namespace: namespace, DumpFile: DumpBaseName + ".s2", DumpSize: int64(len("dump")),
		StartedAt: at, FinishedAt: at}
	doc, err := json.Marshal(&m)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, ManifestFile), doc, 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, m.DumpFile), []byte("dump"), 0o600))
	return dir
}

// Prune keeps each release's newest N and those younger than the window, never a release's
// last backup, and leaves alone what is not a finished backup: an unfinished one, a foreign
// directory, a symbolic link to backups elsewhere.
func TestPruneKeepsByRuleAndReleaseAndNothingElse(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	out := t.TempDir()
	day := 24 * time.Hour
	prod := map[int]string{}
	for _, age := range []int{1, 2, 3, 10, 20} {
		prod[age] = finishedBackup(t, out, "polyaxon-"+now.Add(-time.Duration(age)*day).Format(TimestampLayout), "prod", "polyaxon", now.Add(-time.Duration(age)*day))
	}
	// Another release, with one old backup only: its history is not emptied.
	lone := finishedBackup(t, out, "other-20250101T000000Z", "team-b", "polyaxon", now.Add(-300*day))
	unfinished := filepath.Join(out, "polyaxon-20240101T000000Z")
	require.NoError(t, os.Mkdir(unfinished, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(unfinished, DumpBaseName+".s2"+partialExt), []byte("x"), 0o600))
	// A link straight to an old backup elsewhere, a hidden directory, a file: not backups here.
	outside := finishedBackup(t, t.TempDir(), "polyaxon-20200101T000000Z", "prod", "polyaxon", now.Add(-2000*day))
	link := filepath.Join(out, "polyaxon-20200101T000000Z")
	require.NoError(t, os.Symlink(outside, link))
	hidden := finishedBackup(t, out, ".polyaxon-20200102T000000Z", "prod", "polyaxon", now.Add(-1900*day))
	require.NoError(t, os.WriteFile(filepath.Join(out, "notes.txt"), []byte("x"), 0o600))
	// A forged "newest" (dated in the future) and a damaged one (its dump cut) do not count
	// among the release's newest, and are not removed.
	forged := finishedBackup(t, out, "polyaxon-20990101T000000Z", "prod", "polyaxon", now.Add(3650*day))
	damaged := finishedBackup(t, out, "polyaxon-damaged", "prod", "polyaxon", now.Add(-time.Hour))
	require.NoError(t, os.Truncate(filepath.Join(damaged, DumpBaseName+".s2"), 1))

	// A dry run says what goes and removes nothing.
	got, err := Prune(out, Retention{KeepLast: 2, KeepWithin: 5 * day}, now, true)
	require.NoError(t, err)
	removed := func(ps []Pruned) []string {
		var r []string
		for _, p := range ps {
			if p.Removed {
				r = append(r, p.Dir)
			}
		}
		return r
	}
	assert.ElementsMatch(t, []string{prod[10], prod[20]}, removed(got))
	assert.DirExists(t, prod[10])

	got, err = Prune(out, Retention{KeepLast: 2, KeepWithin: 5 * day}, now, false)
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{prod[10], prod[20]}, removed(got))
	for _, kept := range []string{prod[1], prod[2], prod[3], lone, unfinished, outside, hidden, forged, damaged} {
		assert.DirExists(t, kept)
	}
	st, err := os.Lstat(link)
	require.NoError(t, err, "the link itself is left alone")
	assert.NotZero(t, st.Mode()&os.ModeSymlink)
	assert.FileExists(t, filepath.Join(out, "notes.txt"))
	assert.NoDirExists(t, prod[10])
	assert.NoDirExists(t, prod[20])
	for _, p := range got {
		if p.Dir == prod[3] {
			assert.Equal(t, "younger than 120h0m0s", p.Why)
		}
		if p.Dir == unfinished {
			assert.False(t, p.Removed)
		}
	}

	// Only the newest N: the release's newest stays even with a window that keeps nothing.
	got, err = Prune(out, Retention{KeepWithin: time.Hour}, now, false)
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{prod[2], prod[3]}, removed(got))
	assert.DirExists(t, prod[1])
	assert.DirExists(t, lone)
}

// A rule that keeps nothing, or a negative one, is refused before anything is read.
func TestPruneRefusesRulesThatKeepNothing(t *testing.T) {
	out := t.TempDir()
	old := finishedBackup(t, out, "polyaxon-20200101T000000Z", "prod", "polyaxon", time.Now().Add(-1000*time.Hour))
	finishedBackup(t, out, "polyaxon-20200102T000000Z", "prod", "polyaxon", time.Now().Add(-900*time.Hour))
	for _, r := range []Retention{{}, {KeepLast: -1}, {KeepWithin: -time.Hour}} {
		_, err := Prune(out, r, time.Now(), false)
		require.Error(t, err, "%+v", r)
		assert.Contains(t, err.Error(), "--keep-")
	}
	assert.DirExists(t, old)
}
