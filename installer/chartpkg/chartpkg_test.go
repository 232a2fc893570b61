package chartpkg

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/provenance"
)

const chartDir = "../../charts/polyaxon"

// testKeyring writes a secret keyring holding one new, unencrypted signing key.
func testKeyring(t *testing.T, name string) string {
	t.Helper()
	e, err := openpgp.NewEntity(name, "test", "release@example.com", nil)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "secring.gpg")
	f, err := os.Create(path)
	require.NoError(t, err)
	require.NoError(t, e.SerializePrivate(f, nil))
	require.NoError(t, f.Close())
	return path
}

func TestPackageWritesTheVersionedArchive(t *testing.T) {
	want, err := loader.LoadDir(chartDir)
	require.NoError(t, err)
	res, err := Package(Options{ChartDir: chartDir, Dest: t.TempDir()})
	require.NoError(t, err)
	assert.Equal(t, "polyaxon-"+want.Metadata.Version+".tgz", filepath.Base(res.Archive))
	assert.Empty(t, res.Provenance, "unsigned without a key")
	got, err := loader.Load(res.Archive)
	require.NoError(t, err)
	assert.Equal(t, want.Metadata.AppVersion, got.Metadata.AppVersion)
	assert.Equal(t, len(want.Templates), len(got.Templates), "every template is in the archive")
	assert.Equal(t, len(want.CRDObjects()), len(got.CRDObjects()), "the CRDs are in the archive")

	res, err = Package(Options{ChartDir: chartDir, Dest: t.TempDir(), Version: "9.8.7"})
	require.NoError(t, err)
	assert.Equal(t, "polyaxon-9.8.7.tgz", filepath.Base(res.Archive))
}

func TestPackageSignsWithAProvenanceFile(t *testing.T) {
	keyring := testKeyring(t, "Polyaxon Deploy Test")
	res, err := Package(Options{ChartDir: chartDir, Dest: t.TempDir(), Sign: true, Keyring: keyring, Key: "Polyaxon Deploy Test"})
	require.NoError(t, err)
	require.Equal(t, res.Archive+".prov", res.Provenance)

	verifier, err := provenance.NewFromKeyring(keyring, "")
	require.NoError(t, err)
	v, err := verifier.Verify(res.Archive, res.Provenance)
	require.NoError(t, err, "the provenance file verifies against the signing key")
	assert.Contains(t, v.SignedBy.Identities, "Polyaxon Deploy Test (test) <release@example.com>")

	// The provenance covers the archive's bytes: one changed byte fails verification.
	b, err := os.ReadFile(res.Archive)
	require.NoError(t, err)
	b[len(b)/2] ^= 0xff
	require.NoError(t, os.WriteFile(res.Archive, b, 0o644))
	_, err = verifier.Verify(res.Archive, res.Provenance)
	assert.ErrorContains(t, err, "sha256 sum does not match")
}

func TestPackageBadInput(t *testing.T) {
	t.Run("sign without a key", func(t *testing.T) {
		_, err := Package(Options{ChartDir: chartDir, Dest: t.TempDir(), Sign: true})
		assert.ErrorContains(t, err, "KEYRING=")
	})
	t.Run("key not in the keyring", func(t *testing.T) {
		_, err := Package(Options{ChartDir: chartDir, Dest: t.TempDir(), Sign: true, Keyring: testKeyring(t, "Someone"), Key: "Nobody"})
		assert.ErrorContains(t, err, `key "Nobody"`)
	})
	t.Run("a chart that fails lint leaves no archive", func(t *testing.T) {
		broken := filepath.Join(t.TempDir(), "polyaxon")
		require.NoError(t, os.CopyFS(broken, os.DirFS(chartDir)))
		require.NoError(t, os.WriteFile(filepath.Join(broken, "templates", "broken.yaml"), []byte("a: {{ .Values.no.such.value }}\n"), 0o644))
		dest := t.TempDir()
		_, err := Package(Options{ChartDir: broken, Dest: dest})
		require.ErrorContains(t, err, "broken.yaml")
		entries, _ := os.ReadDir(dest)
		assert.Empty(t, entries, "the archive that failed lint was removed")
	})
}
