package main

import (
	"runtime/debug"

	"github.com/urfave/cli/v2"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/output"
)

// version is set at build time: -ldflags "-X main.version=v1.2.3".
var version = "dev"

// VersionInfo is the `version` result payload.
type VersionInfo struct {
	Version string `json:"version"`
	// Commit and Date are the commit the binary was built from and its time, as Go recorded
	// them in the binary (empty when it was not built from a git checkout); Commit ends in
	// "-dirty" when the checkout had changes.
	Commit       string `json:"commit,omitempty"`
	Date         string `json:"date,omitempty"`
	ChartVersion string `json:"chartVersion"`
	AppVersion   string `json:"appVersion"`
	KubeVersion  string `json:"kubeVersion,omitempty"`
	ChartSource  string `json:"chartSource"`
}

// Table implements output.Tabler.
func (v VersionInfo) Table() ([]string, [][]string) {
	return []string{"COMPONENT", "VERSION"}, [][]string{
		{"polyaxon-deploy", v.Version},
		{"commit", v.Commit},
		{"commit date", v.Date},
		{"chart (" + v.ChartSource + ")", v.ChartVersion},
		{"polyaxon (appVersion)", v.AppVersion},
		{"kubernetes (supported)", v.KubeVersion},
	}
}

func versionCommand() *cli.Command {
	return &cli.Command{
		Name:  "version",
		Usage: "print the binary, chart and Polyaxon versions",
		Flags: joinFlags(outputFlags(), []cli.Flag{
			&cli.StringFlag{Name: flagChart, Usage: "report the chart in `DIR` (or a .tgz, or oci://...) instead of the embedded one"},
		}),
		Action: func(c *cli.Context) error {
			p, err := printer(c)
			if err != nil {
				return err
			}
			env := actionEnv(c)
			ch, err := env.LoadChart(c.Context, chartOptions(c))
			if err != nil {
				return usageExit(err)
			}
			info := VersionInfo{Version: version, ChartSource: ch.Source}
			if bi, ok := debug.ReadBuildInfo(); ok {
				info.Commit, info.Date = commitOf(bi.Settings)
			}
			info.ChartVersion, info.AppVersion, info.KubeVersion = ch.Metadata.Version, ch.Metadata.AppVersion, ch.Metadata.KubeVersion
			return p.Print(output.NewResult("version", output.StatusOK).WithData(info))
		},
	}
}

// commitOf reads the commit and its time from Go's build settings.
func commitOf(settings []debug.BuildSetting) (commit, date string) {
	dirty := false
	for _, s := range settings {
		switch s.Key {
		case "vcs.revision":
			commit = s.Value
		case "vcs.time":
			date = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if dirty && commit != "" {
		commit += "-dirty"
	}
	return commit, date
}
