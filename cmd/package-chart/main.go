// Command package-chart builds the chart archive for publishing (make package):
// dist/polyaxon-<version>.tgz, linted, and signed with a provenance file when a key is given.
//
//	go run ./cmd/package-chart [--chart charts/polyaxon] [--dest dist] [--version V]
//	    [--sign --keyring secring.gpg --key 'name' [--passphrase-file F]]
//
// Push the result with `helm push dist/polyaxon-<version>.tgz oci://HOST/PATH`.
package main

import (
	"fmt"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/chartpkg"
)

func main() {
	app := &cli.App{
		Name:  "package-chart",
		Usage: "package, lint and (optionally) sign the Polyaxon chart",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "chart", Value: "charts/polyaxon", Usage: "chart directory"},
			&cli.StringFlag{Name: "dest", Value: "dist", Usage: "output directory"},
			&cli.StringFlag{Name: "version", Usage: "chart version to write (default: Chart.yaml's)"},
			&cli.StringFlag{Name: "app-version", Usage: "appVersion to write (default: Chart.yaml's)"},
			&cli.BoolFlag{Name: "sign", Usage: "write a provenance file signed with --key from --keyring"},
			&cli.StringFlag{Name: "keyring", Usage: "OpenPGP secret keyring `FILE` (gpg --export-secret-keys)"},
			&cli.StringFlag{Name: "key", Usage: "name of the signing key in the keyring"},
			&cli.StringFlag{Name: "passphrase-file", Usage: "`FILE` holding the key's passphrase (\"-\": stdin)"},
		},
		Action: func(c *cli.Context) error {
			res, err := chartpkg.Package(chartpkg.Options{
				ChartDir: c.String("chart"), Dest: c.String("dest"),
				Version: c.String("version"), AppVersion: c.String("app-version"),
				Sign: c.Bool("sign"), Keyring: c.String("keyring"), Key: c.String("key"), PassphraseFile: c.String("passphrase-file"),
			})
			if err != nil {
				return err
			}
			for _, m := range res.Lint {
				fmt.Fprintf(os.Stderr, "lint: %s\n", m)
			}
			fmt.Println(res.Archive)
			if res.Provenance != "" {
				fmt.Println(res.Provenance)
			}
			return nil
		},
	}
	if err := app.Run(os.Args); err != nil {
		fmt.Fprintln(os.Stderr, "package-chart:", err)
		os.Exit(1)
	}
}
