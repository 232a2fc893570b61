package values_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/values"
)

func TestSplitSetArg(t *testing.T) {
	pairs, err := values.SplitSetArg(`a={x,y},b=c\,d,e[0].f=g`)
	require.NoError(t, err)
	assert.Equal(t, []values.SetPair{
		{Key: "a", Value: "{x,y}", Assigned: true},
		{Key: "b", Value: `c\,d`, Assigned: true},
		{Key: "e[0].f", Value: "g", Assigned: true},
	}, pairs)
	for _, bad := range []string{"", "  ", "=x", "a=1,=x", " =x"} {
		_, err := values.SplitSetArg(bad)
		assert.Error(t, err, "%q", bad)
	}
	_, err = values.SplitSetArg("a=1,postgresql.auth.password=hunter22,=x")
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "hunter22", "the message quotes the argument masked")
}

func TestRedactSetArg(t *testing.T) {
	assert.Equal(t, "logLevel=INFO,postgresql.auth.password=<redacted>", values.RedactSetArg("logLevel=INFO,postgresql.auth.password=hunter22"))
	assert.Equal(t, "secrets.adminPassword=<redacted>,x", values.RedactSetArg(`secrets.adminPassword=a\,b,x`))
	assert.Equal(t, "tolerations.core[0].key=nvidia.com/gpu", values.RedactSetArg("tolerations.core[0].key=nvidia.com/gpu"),
		"nothing secret-like: unchanged")
	assert.ElementsMatch(t, []string{`a\,b`, "a,b"}, values.SetSecrets([]string{`secrets.adminPassword=a\,b`, "logLevel=x"}))
}

// The legacy-key warning shows the new spelling without the password; a --set that fails to
// parse is quoted masked.
func TestBuildNeverQuotesSecrets(t *testing.T) {
	f := writeFile(t, "legacy.yaml", "postgresql:\n  postgresPassword: hunter22\n")
	vals, warns, err := values.BuildFiles("p", nil, values.Options{ValueFiles: []string{f}})
	require.NoError(t, err)
	assert.Equal(t, "hunter22", get(t, vals, "postgresql.auth.password"), "the value itself is migrated")
	require.Len(t, warns, 1)
	assert.NotContains(t, warns[0].String(), "hunter22")
	assert.Contains(t, warns[0].String(), "password: <redacted>")

	_, _, err = values.BuildFiles("p", nil, values.Options{Values: []string{"postgresql.auth.password=hunter22,gateway.replicas"}})
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "hunter22")
	assert.Contains(t, err.Error(), "postgresql.auth.password=<redacted>")
}

// A trailing backslash escapes nothing and stays as written; a key with '=' and nothing after
// it has an empty value.
func TestSplitSetArgEdges(t *testing.T) {
	pairs, err := values.SplitSetArg(`a=b\`)
	require.NoError(t, err)
	assert.Equal(t, []values.SetPair{{Key: "a", Value: `b\`, Assigned: true}}, pairs)
	pairs, err = values.SplitSetArg("a=")
	require.NoError(t, err)
	assert.Equal(t, []values.SetPair{{Key: "a", Value: "", Assigned: true}}, pairs)
	assert.Equal(t, `b\`, values.Unescape(`b\`))
	assert.Equal(t, `b,c`, values.Unescape(`b\,c`))
}
