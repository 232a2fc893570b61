package runs

import (
	"io/fs"
	"path"

	"github.com/polyaxon-deploy/polyaxon-deploy/charts"
)

// Embedded is the declaration of the chart built into the binary (what the check IDs and the
// docs are written against when no other chart is given).
func Embedded() *Declaration {
	data, err := fs.ReadFile(charts.FS, path.Join(charts.Root, DeclarationFile))
	if err != nil {
		panic("embedded chart has no " + DeclarationFile + ": " + err.Error())
	}
	d, err := Parse(data)
	if err != nil {
		panic("embedded chart: " + err.Error())
	}
	return d
}
