package preflight

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestRecreatedStandInFitsAStatefulSetName(t *testing.T) {
	assert.Equal(t, "polyaxon-postgresql-dry-run-new", recreatedStandIn("polyaxon-postgresql"))
	long := strings.Repeat("r", 40) + "-postgresql"
	got := recreatedStandIn(long)
	assert.Len(t, got, 52)
	assert.True(t, strings.HasSuffix(got, "-dry-run-new"))
	assert.Len(t, recreatedStandIn(strings.Repeat("x", 40)), 52, "exactly at the limit")
}
