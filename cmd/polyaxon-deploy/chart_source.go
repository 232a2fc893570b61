package main

import (
	"github.com/urfave/cli/v2"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/chartsource"
)

// Flags that choose where --chart comes from. Names and meanings follow Helm's.
const (
	flagChartVersion   = "version"
	flagRegistryConfig = "registry-config"
	flagCAFile         = "ca-file"
	flagCertFile       = "cert-file"
	flagKeyFile        = "key-file"
	flagInsecureTLS    = "insecure-skip-tls-verify"
	flagPlainHTTP      = "plain-http"
)

const chartUsage = "the chart: a `DIR`, a .tgz, or oci://HOST/PATH/polyaxon in a registry (default: the chart embedded in the binary)"

// chartSourceFlags reach a chart in an OCI registry, e.g. an internal mirror.
func chartSourceFlags() []cli.Flag {
	cat := "Chart source"
	return []cli.Flag{
		&cli.StringFlag{Name: flagChartVersion, Usage: "version of an oci:// chart: exact or a constraint like ~2.15 (default: the newest)", Category: cat},
		&cli.StringFlag{Name: flagRegistryConfig, Usage: "registry credentials `FILE`, as written by `helm registry login` (default: Helm's, then Docker's config)", EnvVars: []string{"HELM_REGISTRY_CONFIG"}, Category: cat},
		&cli.StringFlag{Name: flagCAFile, Usage: "verify the registry's certificate with this CA bundle `FILE`", Category: cat},
		&cli.StringFlag{Name: flagCertFile, Usage: "client certificate `FILE` for the registry", Category: cat},
		&cli.StringFlag{Name: flagKeyFile, Usage: "key `FILE` of --cert-file", Category: cat},
		&cli.BoolFlag{Name: flagInsecureTLS, Usage: "do not verify the registry's certificate (test registries only)", Category: cat},
		&cli.BoolFlag{Name: flagPlainHTTP, Usage: "talk to the registry over HTTP, without TLS", Category: cat},
	}
}

// chartOptions reads the chart source flags of this command (commands without them read "").
func chartOptions(c *cli.Context) chartsource.Options {
	return chartsource.Options{
		Ref:     c.String(flagChart),
		Version: c.String(flagChartVersion),
		Registry: chartsource.RegistryOptions{
			Config:                c.String(flagRegistryConfig),
			CAFile:                c.String(flagCAFile),
			CertFile:              c.String(flagCertFile),
			KeyFile:               c.String(flagKeyFile),
			InsecureSkipTLSVerify: c.Bool(flagInsecureTLS),
			PlainHTTP:             c.Bool(flagPlainHTTP),
		},
		Log: debugWriter{c, "log"},
	}
}
