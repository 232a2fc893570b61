package output_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/output"
)

func TestHumanBytes(t *testing.T) {
	for n, want := range map[int64]string{
		0:             "0 B",
		1023:          "1023 B",
		1024:          "1.0 KiB",
		1536:          "1.5 KiB",
		250 << 20:     "250.0 MiB",
		3 << 29:       "1.5 GiB",
		5 << 40:       "5.0 TiB",
		math.MaxInt64: "8.0 EiB",
	} {
		assert.Equal(t, want, output.HumanBytes(n), "%d", n)
	}
}
