// Package sign signs a release in cosign's formats with a key pair (cosign generate-key-pair's
// files): a file's signature as `cosign sign-blob --key` writes it, and an artifact in an OCI
// registry (the chart) as `cosign sign --key` stores it, so that a user verifies both with the
// cosign CLI and the public key alone (docs/releases.md).
package sign

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"encoding/base64"
	"fmt"
	"os"

	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
)

// PasswordEnv is where the private key's password is read from, as cosign reads it.
const PasswordEnv = "COSIGN_PASSWORD"

// Key is a private key that signs.
type Key struct {
	signer signature.SignerVerifier
	// PublicPEM is the public key users verify with (cosign.pub).
	PublicPEM []byte
}

// NewKeyPair makes an ECDSA P-256 key pair as `cosign generate-key-pair` does: the private key
// encrypted with password (scrypt and secretbox, PEM "ENCRYPTED SIGSTORE PRIVATE KEY"), the
// public key as PKIX PEM.
func NewKeyPair(password []byte) (privatePEM, publicPEM []byte, err error) {
	return cryptoutils.GeneratePEMEncodedECDSAKeyPair(elliptic.P256(), func(bool) ([]byte, error) { return password, nil })
}

// LoadKey reads a private key file: cosign's encrypted format (the password decrypts it), or
// an unencrypted PKCS#8 or SEC 1 PEM key.
func LoadKey(path string, password []byte) (*Key, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("signing key: %w", err)
	}
	priv, err := cryptoutils.UnmarshalPEMToPrivateKey(data, func(bool) ([]byte, error) { return password, nil })
	if err != nil {
		return nil, fmt.Errorf("signing key %s: %w (fix: the password is read from %s; the key is cosign.key from `cosign generate-key-pair`)", path, err, PasswordEnv)
	}
	ec, ok := priv.(*ecdsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("signing key %s is a %T: an ECDSA key is needed (cosign generate-key-pair makes one)", path, priv)
	}
	sv, err := signature.LoadECDSASignerVerifier(ec, crypto.SHA256)
	if err != nil {
		return nil, fmt.Errorf("signing key %s: %w", path, err)
	}
	pub, err := cryptoutils.MarshalPublicKeyToPEM(ec.Public())
	if err != nil {
		return nil, err
	}
	return &Key{signer: sv, PublicPEM: pub}, nil
}

// Sign returns the signature of data (ECDSA over its SHA-256, ASN.1 DER).
func (k *Key) Sign(data []byte) ([]byte, error) {
	return k.signer.SignMessage(bytes.NewReader(data))
}

// SignFile writes path + ".sig": the standard base64 of the file's signature, without a
// newline, as `cosign sign-blob --key K --output-signature` writes it and `cosign verify-blob
// --key cosign.pub --signature` reads it.
func (k *Key) SignFile(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	sig, err := k.Sign(data)
	if err != nil {
		return "", fmt.Errorf("signing %s: %w", path, err)
	}
	out := path + ".sig"
	return out, os.WriteFile(out, []byte(base64.StdEncoding.EncodeToString(sig)), 0o644)
}
