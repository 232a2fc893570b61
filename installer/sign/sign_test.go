package sign

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cosigntest"
)

// keyPair writes a key pair made by NewKeyPair into dir.
func keyPair(t *testing.T, dir, password string) (private, public string) {
	t.Helper()
	priv, pub, err := NewKeyPair([]byte(password))
	require.NoError(t, err)
	private, public = filepath.Join(dir, "cosign.key"), filepath.Join(dir, "cosign.pub")
	require.NoError(t, os.WriteFile(private, priv, 0o600))
	require.NoError(t, os.WriteFile(public, pub, 0o644))
	return private, public
}

// A file signed by our code verifies with `cosign verify-blob` and the public key alone; the
// same signature does not verify a changed file, or with another key.
func TestFileSignatureVerifiesWithCosign(t *testing.T) {
	dir := t.TempDir()
	private, public := keyPair(t, dir, "release-pass")
	key, err := LoadKey(private, []byte("release-pass"))
	require.NoError(t, err)
	file := filepath.Join(dir, "polyaxon-deploy_1.2.3_linux_amd64")
	require.NoError(t, os.WriteFile(file, []byte("a release's binary"), 0o755))
	sig, err := key.SignFile(file)
	require.NoError(t, err)
	assert.Equal(t, file+".sig", sig)

	verify := func(pub, f string) cosigntest.Result {
		return cosigntest.Run(t, pub, nil, "verify-blob", "--key", pub, "--signature", sig, "--insecure-ignore-tlog", f)
	}
	ok := verify(public, file)
	require.NoError(t, ok.Err, ok.Output)
	assert.Contains(t, ok.Output, "Verified OK")

	changed := filepath.Join(dir, "changed")
	require.NoError(t, os.WriteFile(changed, []byte("a release's binary, changed"), 0o755))
	bad := verify(public, changed)
	assert.Error(t, bad.Err, "a changed file does not verify: %s", bad.Output)
	assert.NotContains(t, bad.Output, "Verified OK")

	other := t.TempDir()
	_, otherPub := keyPair(t, other, "other")
	bad = verify(otherPub, file)
	assert.Error(t, bad.Err, "another key does not verify: %s", bad.Output)
}

// A key made by `cosign generate-key-pair` signs through our code, and cosign verifies that
// signature: a release team uses the key pair it already has.
func TestCosignsOwnKeySigns(t *testing.T) {
	dir := t.TempDir()
	gen := cosigntest.Run(t, "", []string{"COSIGN_PASSWORD=team-pass"}, "generate-key-pair", "--output-key-prefix", filepath.Join(dir, "team"))
	require.NoError(t, gen.Err, gen.Output)
	key, err := LoadKey(filepath.Join(dir, "team.key"), []byte("team-pass"))
	require.NoError(t, err)
	public, err := os.ReadFile(filepath.Join(dir, "team.pub"))
	require.NoError(t, err)
	assert.Equal(t, string(public), string(key.PublicPEM), "the public key derived from cosign's private key is cosign's")

	file := filepath.Join(dir, "checksums.txt")
	require.NoError(t, os.WriteFile(file, []byte("0123  polyaxon-deploy\n"), 0o644))
	sig, err := key.SignFile(file)
	require.NoError(t, err)
	res := cosigntest.Run(t, filepath.Join(dir, "team.pub"), nil, "verify-blob", "--key", filepath.Join(dir, "team.pub"), "--signature", sig, "--insecure-ignore-tlog", file)
	require.NoError(t, res.Err, res.Output)
}

// A wrong password, a file that is not a key, a key of the wrong kind: each is refused with
// the key's path and how to fix it, and nothing is signed.
func TestLoadKeyRefusals(t *testing.T) {
	dir := t.TempDir()
	private, public := keyPair(t, dir, "right")
	_, err := LoadKey(private, []byte("wrong"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), private)
	assert.Contains(t, err.Error(), PasswordEnv)

	_, err = LoadKey(public, nil)
	require.Error(t, err, "a public key does not sign")
	assert.Contains(t, err.Error(), public)

	_, err = LoadKey(filepath.Join(dir, "missing.key"), nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "missing.key")

	// A key of the wrong kind: cosign's blob and image signatures here are ECDSA.
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	der, err := x509.MarshalPKCS8PrivateKey(rsaKey)
	require.NoError(t, err)
	rsaPath := filepath.Join(dir, "rsa.key")
	require.NoError(t, os.WriteFile(rsaPath, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600))
	_, err = LoadKey(rsaPath, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "an ECDSA key is needed")
}
