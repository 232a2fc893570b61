// Package charts embeds the Polyaxon chart so the binary alone can install.
package charts

import "embed"

// Root is the chart's directory inside FS.
const Root = "polyaxon"

// FS holds charts/polyaxon. The all: prefix keeps files starting with _ or . (without it Go
// silently drops _helpers.tpl and .helmignore and rendering fails).
//
//go:embed all:polyaxon
var FS embed.FS

// ReadFile reads a file of the embedded chart by its path inside the chart (e.g.
// "files/components.yaml").
func ReadFile(name string) ([]byte, error) { return FS.ReadFile(Root + "/" + name) }
