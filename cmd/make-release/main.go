// Command make-release writes the files of a release of polyaxon-deploy (make release): a
// static binary per platform with the version stamped in, a CycloneDX SBOM of each, and
// checksums.txt.
//
//	go run ./cmd/make-release --version v1.2.3 [--dest dist/release] [--targets linux/amd64,darwin/arm64]
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/urfave/cli/v2"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/dist"
)

func main() {
	app := &cli.App{
		Name:  "make-release",
		Usage: "build polyaxon-deploy for every platform, with an SBOM per binary and checksums",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "version", Required: true, Usage: "the release's version, stamped into the binaries (e.g. v1.2.3)"},
			&cli.StringFlag{Name: "dest", Value: "dist/release", Usage: "a new directory for the files"},
			&cli.StringFlag{Name: "targets", Usage: "os/arch list (default: linux and darwin, amd64 and arm64)"},
		},
		Action: func(c *cli.Context) error {
			targets := dist.DefaultTargets
			if s := c.String("targets"); s != "" {
				var err error
				if targets, err = dist.ParseTargets(s); err != nil {
					return err
				}
			}
			res, err := dist.Build(c.Context, dist.Options{Module: ".", Package: "./cmd/polyaxon-deploy", Name: "polyaxon-deploy",
				Version: c.String("version"), Targets: targets, Dest: c.String("dest")})
			if err != nil {
				return err
			}
			for _, f := range append(append(res.Binaries, res.SBOMs...), res.Checksums) {
				fmt.Println(filepath.Join(c.String("dest"), f))
			}
			return nil
		},
	}
	if err := app.Run(os.Args); err != nil {
		fmt.Fprintln(os.Stderr, "make-release:", err)
		os.Exit(1)
	}
}
