package runs

import (
	"github.com/polyaxon-deploy/polyaxon-deploy/charts"
)

// Embedded is the declaration of the chart built into the binary (what the check IDs and the
// docs are written against when no other chart is given).
func Embedded() *Declaration {
	data, err := charts.ReadFile(DeclarationFile)
	if err != nil {
		panic("embedded chart has no " + DeclarationFile + ": " + err.Error())
	}
	d, err := Parse(data)
	if err != nil {
		panic("embedded chart: " + err.Error())
	}
	return d
}
