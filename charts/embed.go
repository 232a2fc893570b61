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
