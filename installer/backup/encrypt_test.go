package backup

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"filippo.io/age"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/pgtest"
)

// secretDoc is a release's Secrets as a backup keeps them: what a reader of the backup's
// files must not see without the key.
func secretDoc(context.Context) ([]byte, []string, error) {
	return []byte(`{"apiVersion":"v1","kind":"List","items":[{"kind":"Secret","data":{"POLYAXON_SECRET_KEY":"sealed-platform-key-123"}}]}` + "\n"),
		[]string{"polyaxon-platform"}, nil
}

// A backup sealed with age: its files read as nothing without the key; verify and restore
// with the key give the database back; a changed byte, a changed file with a manifest made to
// agree, and another key are refused before anything is restored.
func TestEncryptedBackupRoundTrip(t *testing.T) {
	ctx := context.Background()
	s, want := sharedServer(t)
	bin, _ := toolWrappers(t, s)
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp) // where backups are opened
	openedLeft := func() []string {
		left, err := filepath.Glob(filepath.Join(tmp, "polyaxon-deploy-opened-*"))
		require.NoError(t, err)
		return left
	}
	key, err := age.GenerateX25519Identity()
	require.NoError(t, err)
	recipients, names, err := ParseRecipients([]string{"# the team's backup key", key.Recipient().String()})
	require.NoError(t, err)

	m, err := Create(ctx, localTarget(s, s.Database, bin), WithOutputDir(t.TempDir()),
		WithRelease(ReleaseInfo{Name: "polyaxon", Namespace: "ns1", Revision: 1, ChartVersion: "2.18.0", AppVersion: "2.18.0"}),
		WithSecrets(secretDoc))
	require.NoError(t, err)
	plainDump := m.DumpFile
	sealed, err := Encrypt(ctx, m.Dir, recipients, names)
	require.NoError(t, err)
	require.NotNil(t, sealed.Encryption)
	assert.Equal(t, []string{key.Recipient().String()}, sealed.Encryption.Recipients)

	// Only the manifest and the sealed files are left, and no file holds the secret.
	files, err := filepath.Glob(filepath.Join(m.Dir, "*"))
	require.NoError(t, err)
	var base []string
	for _, f := range files {
		base = append(base, filepath.Base(f))
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		assert.NotContains(t, string(b), "sealed-platform-key-123", f)
	}
	assert.ElementsMatch(t, []string{ManifestFile, plainDump + EncryptedExt, SecretsFile + EncryptedExt}, base)
	onDisk, err := ReadManifest(m.Dir)
	require.NoError(t, err)
	assert.Equal(t, sealed.Encryption, onDisk.Encryption)
	require.NoError(t, Checksum(ctx, m.Dir), "the sealed files' checksums hold without the key")

	// Without the key, or with another one: refused, naming the flag.
	_, err = Verify(ctx, m.Dir, WithToolsDir(bin))
	require.ErrorIs(t, err, ErrEncrypted)
	assert.Contains(t, err.Error(), "--identity")
	other, err := age.GenerateX25519Identity()
	require.NoError(t, err)
	_, err = Verify(ctx, m.Dir, WithToolsDir(bin), WithIdentities(other))
	require.Error(t, err, "another key opens nothing")

	// With the key: verified, restored, identical; nothing plain is left behind.
	rep, err := Verify(ctx, m.Dir, WithToolsDir(bin), WithIdentities(key), WithFullCheck())
	require.NoError(t, err)
	assert.Equal(t, len(pgtest.Tables), rep.TableData)
	require.NoError(t, s.CreateDatabase(ctx, "sealed_restored"))
	_, err = Restore(ctx, localTarget(s, "sealed_restored", bin), m.Dir, WithToolsDir(bin), WithIdentities(key))
	require.NoError(t, err)
	got, err := pgtest.Checksums(ctx, s, "sealed_restored")
	require.NoError(t, err)
	assert.Equal(t, want, got)
	assert.Empty(t, openedLeft(), "the opened files are removed")
	inBackup, err := os.ReadDir(m.Dir)
	require.NoError(t, err)
	assert.Len(t, inBackup, 3, "nothing plain was written beside the sealed files")

	// An interrupted sealing (a plain copy left beside its sealed file) shows in the checksum
	// check, and sealing again finishes the job.
	require.NoError(t, os.WriteFile(filepath.Join(m.Dir, SecretsFile), []byte("{}"), 0o600))
	err = Checksum(ctx, m.Dir)
	require.ErrorIs(t, err, ErrIncomplete)
	assert.Contains(t, err.Error(), "a plain copy of secrets.json")
	_, err = Encrypt(ctx, m.Dir, recipients, names)
	require.NoError(t, err)
	require.NoError(t, Checksum(ctx, m.Dir))
	assert.NoFileExists(t, filepath.Join(m.Dir, SecretsFile))
	entries, err := List(filepath.Dir(m.Dir))
	require.NoError(t, err)
	require.Len(t, entries, 1)
	assert.Empty(t, entries[0].Problem)

	// A changed byte of the sealed dump: the checksum tells it, and restore changes nothing.
	require.NoError(t, s.CreateDatabase(ctx, "sealed_untouched"))
	_, err = s.Psql(ctx, "sealed_untouched", `CREATE TABLE keep (v text); INSERT INTO keep VALUES ('before');`)
	require.NoError(t, err)
	untouched := localTarget(s, "sealed_untouched", bin)
	damaged := copyBackup(t, m.Dir)
	flipMiddle(t, filepath.Join(damaged, plainDump+EncryptedExt))
	_, err = Verify(ctx, damaged, WithToolsDir(bin), WithIdentities(key))
	require.ErrorIs(t, err, ErrChecksum)
	_, err = Restore(ctx, untouched, damaged, WithToolsDir(bin), WithIdentities(key))
	require.ErrorIs(t, err, ErrChecksum)

	// The same change with the manifest made to agree: age's own authentication refuses it.
	agreeing := copyBackup(t, m.Dir)
	flipMiddle(t, filepath.Join(agreeing, plainDump+EncryptedExt))
	am, err := ReadManifest(agreeing)
	require.NoError(t, err)
	for i, f := range am.Encryption.Files {
		if f.Plain == plainDump {
			sum, err := fileSum(filepath.Join(agreeing, f.File))
			require.NoError(t, err)
			am.Encryption.Files[i].SHA256 = sum
		}
	}
	doc, err := json.Marshal(am)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(agreeing, ManifestFile), doc, 0o600))
	_, err = Restore(ctx, untouched, agreeing, WithToolsDir(bin), WithIdentities(key))
	require.Error(t, err)
	assert.NotErrorIs(t, err, ErrChecksum, "the sha256 agrees: age's authentication refused it")
	assert.Empty(t, openedLeft(), "a refused open leaves nothing plain behind")
	out, err := s.Psql(ctx, "sealed_untouched", `SELECT v FROM keep`)
	require.NoError(t, err)
	assert.Equal(t, "before", strings.TrimSpace(out), "a refused restore changed nothing")
}

// Recipients that are not age public keys are refused with the flag and the fix.
func TestParseRecipientsRefusals(t *testing.T) {
	for _, bad := range [][]string{{"ssh-ed25519 AAAA"}, {"age1notakey"}, {}, {"# only a comment"}} {
		_, _, err := ParseRecipients(bad)
		require.Error(t, err, "%q", bad)
		assert.Contains(t, err.Error(), "--encrypt-to")
	}
}

// flipMiddle flips a byte in the middle of a file (a data chunk, not age's header).
func flipMiddle(t *testing.T, path string) {
	t.Helper()
	st, err := os.Stat(path)
	require.NoError(t, err)
	flipByte(t, path, st.Size()/2)
}

func fileSum(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// A sealed backup's manifest that names a file outside the backup, or a file under another
// name, is refused when read: nothing outside the directory is read or written.
func TestSealedManifestNamesStayInTheBackup(t *testing.T) {
	for _, f := range []SealedFile{
		{Plain: "../../escape", File: "../../escape.age"},
		{Plain: "database.dump.s2", File: "/etc/passwd"},
		{Plain: ManifestFile, File: ManifestFile + EncryptedExt},
		{Plain: "database.dump.s2", File: "other.age"},
		{Plain: "..", File: "...age"},
	} {
		dir := t.TempDir()
		m := Manifest{FormatVersion: FormatVersion, DumpFile: "database.dump.s2", Encryption: &Encryption{Scheme: "age", Files: []SealedFile{f}}}
		doc, err := json.Marshal(&m)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, ManifestFile), doc, 0o600))
		_, err = ReadManifest(dir)
		require.Error(t, err, "%+v", f)
		assert.Contains(t, err.Error(), "must be a plain file name")
	}
}
