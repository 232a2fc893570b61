package main

import (
	"fmt"

	"github.com/urfave/cli/v2"
	"helm.sh/helm/v3/pkg/chart"

	"github.com/polyaxon-deploy/polyaxon-deploy/charts"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/output"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/render"
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
			&cli.StringFlag{Name: flagChart, Usage: "report the chart in `DIR` instead of the embedded one"},
		}),
		Action: func(c *cli.Context) error {
			p, err := printer(c)
			if err != nil {
				return err
			}
			info := VersionInfo{Version: version, ChartSource: "embedded"}
			ch, err := loadChartOnly(c)
			if err != nil {
				return err
			}
			if c.String(flagChart) != "" {
				info.ChartSource = c.String(flagChart)
			}
			info.ChartVersion, info.AppVersion, info.KubeVersion = ch.Metadata.Version, ch.Metadata.AppVersion, ch.Metadata.KubeVersion
			return p.Print(output.NewResult("version", output.StatusOK).WithData(info))
		},
	}
}

// loadChartOnly loads the chart without profile or values.
func loadChartOnly(c *cli.Context) (*chart.Chart, error) {
	if dir := c.String(flagChart); dir != "" {
		ch, err := render.LoadDir(dir)
		return ch, err
	}
	ch, err := render.LoadFS(charts.FS, charts.Root)
	if err != nil {
		return nil, fmt.Errorf("embedded chart: %w", err)
	}
	return ch, nil
}
