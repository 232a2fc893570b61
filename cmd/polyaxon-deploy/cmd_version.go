package main

import (
	"github.com/urfave/cli/v2"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/output"
)

// version is set at build time: -ldflags "-X main.version=v1.2.3".
var version = "dev"

// VersionInfo is the `version` result payload.
type VersionInfo struct {
	Version      string `json:"version"`
	ChartVersion string `json:"chartVersion"`
	AppVersion   string `json:"appVersion"`
	KubeVersion  string `json:"kubeVersion,omitempty"`
	ChartSource  string `json:"chartSource"`
}

// Table implements output.Tabler.
func (v VersionInfo) Table() ([]string, [][]string) {
	return []string{"COMPONENT", "VERSION"}, [][]string{
		{"polyaxon-deploy", v.Version},
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
			info.ChartVersion, info.AppVersion, info.KubeVersion = ch.Metadata.Version, ch.Metadata.AppVersion, ch.Metadata.KubeVersion
			return p.Print(output.NewResult("version", output.StatusOK).WithData(info))
		},
	}
}
