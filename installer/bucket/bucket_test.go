package bucket

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseLocation(t *testing.T) {
	for in, want := range map[string]Location{
		"s3://team-backups":             {Bucket: "team-backups"},
		"s3://team-backups/":            {Bucket: "team-backups"},
		"s3://team-backups/polyaxon/":   {Bucket: "team-backups", Prefix: "polyaxon"},
		"s3://team.backups/a/b":         {Bucket: "team.backups", Prefix: "a/b"},
		"s3://tb1/polyaxon-2026/latest": {Bucket: "tb1", Prefix: "polyaxon-2026/latest"},
	} {
		got, err := ParseLocation(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	// Each names what is wrong; none may reach a key it does not seem to.
	for in, msg := range map[string]string{
		"/var/backups":            "not a bucket location",
		"s3://":                   "bucket name",
		"s3://Team":               "bucket name",
		"s3://ab":                 "bucket name",
		"s3://team/a//b":          "empty, '.' or '..'",
		"s3://team/a/../../other": "empty, '.' or '..'",
		"s3://team/./a":           "empty, '.' or '..'",
		"s3://key:secret@team/a":  "no user",
		"s3://team:9000/a":        "no user, port",
		"s3://team/a?versionId=1": "query",
		"s3://team/a#frag":        "fragment",
	} {
		_, err := ParseLocation(in)
		require.Error(t, err, in)
		assert.Contains(t, err.Error(), msg, in)
	}
}

func TestLocationJoinAndSplit(t *testing.T) {
	l := Location{Bucket: "b", Prefix: "p"}
	assert.Equal(t, "s3://b/p/polyaxon-1", l.Join("polyaxon-1").String())
	parent, name := l.Join("polyaxon-1").Split()
	assert.Equal(t, l, parent)
	assert.Equal(t, "polyaxon-1", name)
	top := Location{Bucket: "b"}
	assert.Equal(t, "s3://b/x", top.Join("x").String())
	parent, name = top.Join("x").Split()
	assert.Equal(t, top, parent)
	assert.Equal(t, "x", name)
	assert.Equal(t, "p/manifest.json", l.key("manifest.json"))
	assert.Equal(t, "p/", l.key(""), "a listing of p/ does not reach p2/")
}
