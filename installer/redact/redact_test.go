package redact_test

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/redact"
)

func TestIsSecretKey(t *testing.T) {
	for _, k := range []string{"password", "Password", "postgresPassword", "postgresqlPassword", "secretKey", "internalToken",
		"adminPassword", "POLYAXON_SECRET_KEY", "api-key", "accessKey", "token", "secret", "key", "tls_key"} {
		assert.True(t, redact.IsSecretKey(k), k)
	}
	for _, k := range []string{"existingSecret", "passwordKey", "secretName", "topologyKey", "username", "keyboard",
		"secrets", "imagePullSecrets", "monkey", "host", "replicas"} {
		assert.False(t, redact.IsSecretKey(k), k)
	}
	assert.True(t, redact.IsSecretPath("postgresql.auth.password"))
	assert.True(t, redact.IsSecretPath("x.tokens[0]") == false)
	assert.True(t, redact.IsSecretPath("a.apiKey[1]"))
	assert.False(t, redact.IsSecretPath("postgresql.auth.existingSecret"))
	assert.False(t, redact.IsSecretPath("tolerations.core[0].key"))
	assert.False(t, redact.IsSecretPath("affinity.core.nodeAffinity.x.matchExpressions[0].key"))
	assert.True(t, redact.IsSecretPath("sso.key"))
}

func TestIsIdentityKey(t *testing.T) {
	for _, k := range []string{"postgres-user", "username", "DB_HOST", "database", "email"} {
		assert.True(t, redact.IsIdentityKey(k), k)
	}
	for _, k := range []string{"postgres-password", "admin-user-password", "rabbitmq-erlang-cookie", "POLYAXON_SECRET_KEY"} {
		assert.False(t, redact.IsIdentityKey(k), k)
	}
}

func TestValuesMasksSecretsOnly(t *testing.T) {
	in := map[string]any{
		"postgresql": map[string]any{"auth": map[string]any{"password": "hunter22", "username": "polyaxon", "existingSecret": "pg"}},
		"secrets":    map[string]any{"secretKey": "", "internalToken": 12345},
		"tolerations": map[string]any{"core": []any{
			map[string]any{"key": "nvidia.com/gpu", "operator": "Exists"},
		}},
		"sso": []any{map[string]any{"key": "abcd-efgh"}},
	}
	out := redact.Values(in)
	auth := out["postgresql"].(map[string]any)["auth"].(map[string]any)
	assert.Equal(t, redact.Mask, auth["password"])
	assert.Equal(t, "polyaxon", auth["username"])
	assert.Equal(t, "pg", auth["existingSecret"], "a reference to a Secret is not a secret")
	sec := out["secrets"].(map[string]any)
	assert.Equal(t, "", sec["secretKey"], "an empty value stays visibly empty")
	assert.Equal(t, redact.Mask, sec["internalToken"])
	tol := out["tolerations"].(map[string]any)["core"].([]any)[0].(map[string]any)
	assert.Equal(t, "nvidia.com/gpu", tol["key"], "a toleration key is a label key, not a secret")
	assert.Equal(t, redact.Mask, out["sso"].([]any)[0].(map[string]any)["key"])
	assert.Equal(t, "hunter22", in["postgresql"].(map[string]any)["auth"].(map[string]any)["password"], "the input is not modified")

	assert.ElementsMatch(t, []string{"hunter22", "12345", "abcd-efgh"}, redact.Secrets(in))
}

func TestScrubber(t *testing.T) {
	s := redact.NewScrubber()
	s.Add("abc", "hunter22", "hunter22-long", "-----BEGIN KEY-----\nMIIBsecretline\n-----END KEY-----\n")
	assert.Equal(t, "pw <redacted> and <redacted>, abc", s.String("pw hunter22-long and hunter22, abc"),
		"longest first; values shorter than MinLength are left alone")
	assert.Equal(t, "line <redacted>", s.String("line MIIBsecretline"))
	var buf bytes.Buffer
	n, err := s.Writer(&buf).Write([]byte("x hunter22\n"))
	assert.NoError(t, err)
	assert.Equal(t, 11, n)
	assert.Equal(t, "x <redacted>\n", buf.String())
	var nilScrubber *redact.Scrubber
	assert.Equal(t, "hunter22", nilScrubber.String("hunter22"))
}
