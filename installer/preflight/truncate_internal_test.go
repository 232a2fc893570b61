package preflight

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// Long lists are cut with "and N more" only when there are more: a list of exactly the limit
// is shown whole.
func TestListsSayHowManyMoreOnlyWhenThereAreMore(t *testing.T) {
	errs := func(n int) []string {
		var out []string
		for i := 0; i < n; i++ {
			out = append(out, fmt.Sprintf("e%d", i))
		}
		return out
	}
	assert.Equal(t, strings.Join(errs(10), "\n"), joinErrs(errs(10), 10).Error())
	assert.Equal(t, strings.Join(append(errs(10), "... and 1 more"), "\n"), joinErrs(errs(11), 10).Error())

	assert.Equal(t, errs(5), first(errs(5), 5))
	assert.Equal(t, append(errs(5), "and 1 more"), first(errs(6), 5))
}
