// Package profiles embeds the installer profiles (values overlay + policy), one YAML file each.
package profiles

import "embed"

// FS holds every profile file (<name>.yaml) at its root.
//
//go:embed *.yaml
var FS embed.FS
