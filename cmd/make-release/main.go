// Command make-release writes the files of a release of polyaxon-deploy (make release): a
// static binary per platform with the version stamped in, a CycloneDX SBOM of each, the
// chart's archive (and its OpenPGP provenance), checksums.txt, and a cosign signature of every
// file; with --push, the chart goes to an OCI registry with its provenance, a cosign signature
// and Artifact Hub's metadata.
//
//	COSIGN_PASSWORD=... go run ./cmd/make-release --version v1.2.3 --signing-key cosign.key \
//	  [--dest dist/release] [--targets linux/amd64] [--keyring secring.gpg --key NAME] [--push oci://HOST/charts]
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/urfave/cli/v2"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/chartpkg"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/chartsource"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/dist"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/sign"
)

func main() {
	app := &cli.App{
		Name:  "make-release",
		Usage: "build polyaxon-deploy for every platform, with an SBOM per binary, the chart, checksums and signatures",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "version", Required: true, Usage: "the release's version, stamped into the binaries (e.g. v1.2.3)"},
			&cli.StringFlag{Name: "dest", Value: "dist/release", Usage: "a new directory for the files"},
			&cli.StringFlag{Name: "targets", Usage: "os/arch list (default: linux and darwin, amd64 and arm64)"},
			&cli.StringFlag{Name: "signing-key", Usage: "cosign private key (cosign generate-key-pair's cosign.key); its password in " + sign.PasswordEnv},
			&cli.BoolFlag{Name: "unsigned", Usage: "a trial build without signatures"},
			&cli.StringFlag{Name: "chart", Value: "charts/polyaxon", Usage: "the chart packaged into the release"},
			&cli.StringFlag{Name: "keyring", Usage: "OpenPGP secret keyring for the chart's provenance file (Helm's)"},
			&cli.StringFlag{Name: "key", Usage: "the key's name in --keyring"},
			&cli.StringFlag{Name: "push", Usage: "oci://HOST/PATH: push the chart there, signed, with Artifact Hub's metadata"},
			&cli.StringFlag{Name: "artifacthub-metadata", Value: "charts/artifacthub-repo.yml", Usage: "Artifact Hub's repository metadata pushed with --push"},
			&cli.StringFlag{Name: "registry-config", Usage: "the registry's credentials (helm registry login's file)"},
			&cli.StringFlag{Name: "ca-file", Usage: "CA bundle of the registry's certificate"},
			&cli.BoolFlag{Name: "plain-http", Usage: "talk HTTP to the registry"},
		},
		Action: run,
	}
	if err := app.Run(os.Args); err != nil {
		fmt.Fprintln(os.Stderr, "make-release:", err)
		os.Exit(1)
	}
}

func run(c *cli.Context) error {
	targets := dist.DefaultTargets
	if s := c.String("targets"); s != "" {
		var err error
		if targets, err = dist.ParseTargets(s); err != nil {
			return err
		}
	}
	// Everything the release needs is read before anything is built.
	var key *sign.Key
	if path := c.String("signing-key"); path != "" {
		var err error
		if key, err = sign.LoadKey(path, []byte(os.Getenv(sign.PasswordEnv))); err != nil {
			return err
		}
	}
	if c.String("push") != "" && key == nil {
		return fmt.Errorf("--push signs the chart in the registry: give --signing-key")
	}
	chart := &chartpkg.Options{ChartDir: c.String("chart"), Keyring: c.String("keyring"), Key: c.String("key"), Sign: c.String("keyring") != ""}
	res, err := dist.Build(c.Context, dist.Options{Module: ".", Package: "./cmd/polyaxon-deploy", Name: "polyaxon-deploy",
		Version: c.String("version"), Targets: targets, Dest: c.String("dest"), Chart: chart, Key: key, Unsigned: c.Bool("unsigned")})
	if err != nil {
		return err
	}
	files := append(append(res.Binaries, res.SBOMs...), res.Chart)
	if res.Provenance != "" {
		files = append(files, res.Provenance)
	}
	for _, f := range append(append(files, res.Checksums), res.Signatures...) {
		fmt.Println(filepath.Join(c.String("dest"), f))
	}
	if c.String("push") == "" {
		return nil
	}
	prov := ""
	if res.Provenance != "" {
		prov = filepath.Join(c.String("dest"), res.Provenance)
	}
	pub, err := dist.PublishChart(c.Context, dist.PublishOptions{
		Archive: filepath.Join(c.String("dest"), res.Chart), Provenance: prov, Repository: c.String("push"),
		Registry: chartsource.RegistryOptions{Config: c.String("registry-config"), CAFile: c.String("ca-file"), PlainHTTP: c.Bool("plain-http")},
		Key:      key, ArtifactHubMetadata: c.String("artifacthub-metadata"),
	})
	if err != nil {
		return err
	}
	fmt.Printf("pushed %s@%s, signature %s\n", pub.Ref, pub.Digest, pub.Signature)
	return nil
}
