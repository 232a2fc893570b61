package e2e

import (
	"crypto/pbkdf2"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// checkDjangoPassword verifies password against a hash in Django's default format,
// `pbkdf2_sha256$<iterations>$<salt>$<base64 of the derived key>` (the one Polyaxon's users
// table holds): a check of the admin user that needs no login endpoint (Polyaxon CE has none).
func checkDjangoPassword(password, encoded string) (bool, error) {
	parts := strings.Split(encoded, "$")
	if len(parts) != 4 || parts[0] != "pbkdf2_sha256" {
		return false, fmt.Errorf("password hash %.20q...: not pbkdf2_sha256", encoded)
	}
	iter, err := strconv.Atoi(parts[1])
	if err != nil {
		return false, fmt.Errorf("password hash: iterations %q: %w", parts[1], err)
	}
	want, err := base64.StdEncoding.DecodeString(parts[3])
	if err != nil {
		return false, fmt.Errorf("password hash: %w", err)
	}
	got, err := pbkdf2.Key(sha256.New, password, []byte(parts[2]), iter, len(want))
	if err != nil {
		return false, err
	}
	return subtle.ConstantTimeCompare(got, want) == 1, nil
}

func TestCheckDjangoPassword(t *testing.T) {
	// Made by Django 5.2's PBKDF2PasswordHasher (in Polyaxon's virtual environment) for "s3cret",
	// salt "abcdefgh", 1000 iterations.
	const hash = "pbkdf2_sha256$1000$abcdefgh$uNKrFPAmM7FQm5fdc0DLn/ysJ/XGaIJKYNsYPoDcpNo="
	ok, err := checkDjangoPassword("s3cret", hash)
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = checkDjangoPassword("other", hash)
	require.NoError(t, err)
	require.False(t, ok)
	_, err = checkDjangoPassword("s3cret", "argon2$x")
	require.Error(t, err)
}
