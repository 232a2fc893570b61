package main

// The flags shared by commands, in groups (cluster, input, output, checks, release), and the
// parsing of positional arguments.

import (
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/kube"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/output"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/profile"
)

// Flag names, shared so other commands read them the same way.
const (
	flagKubeconfig  = "kubeconfig"
	flagContext     = "context"
	flagNamespace   = "namespace"
	flagRelease     = "release"
	flagDebugLog    = "debug-log"
	flagProfile     = "profile"
	flagValues      = "values"
	flagSet         = "set"
	flagSetString   = "set-string"
	flagSetFile     = "set-file"
	flagChart       = "chart"
	flagOutput      = "output"
	flagStrict      = "strict"
	flagIgnore      = "ignore"
	defaultRelease  = "polyaxon"
	defaultProfile  = profile.Default // "production": install and render default to it
	envDebugLogFile = "POLYAXON_DEPLOY_DEBUG_LOG"
)

// clusterFlags follow kubectl. They are defined on each command (not on the App) so they can be
// written after the command name, as with kubectl: `polyaxon-deploy check -n ml --context prod`.
func clusterFlags() []cli.Flag {
	return append([]cli.Flag{
		&cli.StringFlag{Name: flagKubeconfig, Usage: "path to the kubeconfig file (default: $KUBECONFIG, which may list several files, or ~/.kube/config)", Category: "Cluster"},
		&cli.StringFlag{Name: flagContext, Usage: "kubeconfig context to use (default: the current context)", Category: "Cluster"},
		&cli.StringFlag{Name: flagNamespace, Aliases: []string{"n"}, Value: kube.DefaultNamespace, Usage: "namespace of the release", Category: "Cluster"},
		&cli.StringFlag{Name: flagRelease, Value: defaultRelease, Usage: "Helm release name", Category: "Cluster"},
		debugLogFlag(),
	}, accessFlags(false)...)
}

// kubectl's other cluster flags, with kubectl's names and meaning.
const (
	flagCluster       = "cluster"
	flagUser          = "user"
	flagServer        = "server"
	flagTLSServerName = "tls-server-name"
	flagCA            = "certificate-authority"
	flagClientCert    = "client-certificate"
	flagClientKey     = "client-key"
	flagToken         = "token"
	// Helm's name for it: --insecure-skip-tls-verify is the registry's here, as in `helm pull`.
	flagInsecure   = "kube-insecure-skip-tls-verify"
	flagAs         = "as"
	flagAsUID      = "as-uid"
	flagAsGroup    = "as-group"
	flagReqTimeout = "request-timeout"
)

func accessFlags(hidden bool) []cli.Flag {
	str := func(name, usage string, aliases ...string) cli.Flag {
		return &cli.StringFlag{Name: name, Aliases: aliases, Usage: usage, Category: "Cluster", Hidden: hidden}
	}
	return []cli.Flag{
		str(flagCluster, "kubeconfig cluster to use"),
		str(flagUser, "kubeconfig user to use"),
		str(flagServer, "address and port of the API server", serverAlias(hidden)...),
		str(flagTLSServerName, "server name to check the API server's certificate against"),
		str(flagCA, "path to a CA certificate file for the API server"),
		str(flagClientCert, "path to a client certificate file"),
		str(flagClientKey, "path to a client key file"),
		str(flagToken, "bearer token for the API server"),
		&cli.BoolFlag{Name: flagInsecure, Usage: "do not check the API server's certificate (insecure)", Category: "Cluster", Hidden: hidden},
		str(flagAs, "user to impersonate"),
		str(flagAsUID, "UID to impersonate"),
		&cli.StringSliceFlag{Name: flagAsGroup, Usage: "group to impersonate, repeatable", Category: "Cluster", Hidden: hidden},
		str(flagReqTimeout, `how long one request to the API server may take ("30s", "1m"; "0": no bound)`),
	}
}

// serverAlias is kubectl's -s, except where the flag is only accepted: render's -s is Helm's
// --show-only.
func serverAlias(hidden bool) []string {
	if hidden {
		return nil
	}
	return []string{"s"}
}

// accessOf reads kubectl's other cluster flags.
func accessOf(c *cli.Context) kube.Access {
	return kube.Access{
		Cluster: c.String(flagCluster), User: c.String(flagUser), Server: c.String(flagServer), TLSServerName: c.String(flagTLSServerName),
		CertificateAuthority: c.String(flagCA), ClientCertificate: c.String(flagClientCert), ClientKey: c.String(flagClientKey),
		Token: c.String(flagToken), InsecureSkipTLSVerify: c.Bool(flagInsecure),
		As: c.String(flagAs), AsUID: c.String(flagAsUID), AsGroups: c.StringSlice(flagAsGroup), RequestTimeout: c.String(flagReqTimeout),
	}
}

func debugLogFlag() cli.Flag {
	return &cli.StringFlag{Name: flagDebugLog, Usage: "write a debug log to `FILE` (default: kept in memory and written to a temp file only on failure; the path is printed)", EnvVars: []string{envDebugLogFile}, Category: "Output"}
}

// inputFlags choose the chart, the profile and the values layered on top of it.
// Layering, last wins: chart defaults < profile < each -f in order < --set < --set-string < --set-file.
func inputFlags() []cli.Flag {
	return append([]cli.Flag{
		&cli.StringFlag{Name: flagProfile, Aliases: []string{"p"}, Value: defaultProfile, Usage: "installer profile (" + strings.Join(profile.Names(), ", ") + ") or a profile file path", Category: "Input"},
		&cli.StringSliceFlag{Name: flagValues, Aliases: []string{"f"}, Usage: "values file, repeatable; later files win", Category: "Input"},
		&cli.StringSliceFlag{Name: flagSet, Usage: "set a value (a.b=c, list: a={x,y}, index: a[0].b=c), repeatable", Category: "Input"},
		&cli.StringSliceFlag{Name: flagSetString, Usage: "like --set but the value is always a string", Category: "Input"},
		&cli.StringSliceFlag{Name: flagSetFile, Usage: "set a value from a file's content (key=path)", Category: "Input"},
		&cli.StringFlag{Name: flagChart, Usage: chartUsage, Category: "Input"},
	}, append(officialValuesFlags(), chartSourceFlags()...)...)
}

// outputFlags: -o selects the result format on stdout; human progress always goes to stderr.
func outputFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: flagOutput, Aliases: []string{"o"}, Value: string(output.FormatTable), Usage: "result format: table, json or yaml", Category: "Output"},
	}
}

// checkFlags tune how preflight results end the command.
func checkFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringSliceFlag{Name: flagIgnore, Usage: "demote a failing check `ID` to a warning (still printed); repeatable; 'all' ignores every check", Category: "Checks"},
		&cli.BoolFlag{Name: flagStrict, Usage: "exit 4 when checks pass with warnings", Category: "Checks"},
	}
}

// listFlag returns a repeatable flag whose values are names (check IDs, label keys, template
// paths), accepting commas too (--ignore a,b): the App does not split slices itself, so that
// --set and -f reach Helm's parser whole.
func listFlag(c *cli.Context, name string) []string {
	var out []string
	for _, v := range c.StringSlice(name) {
		for _, s := range strings.Split(v, ",") {
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, s)
			}
		}
	}
	return out
}

// joinFlags concatenates flag groups for a command definition.
func joinFlags(groups ...[]cli.Flag) []cli.Flag {
	var out []cli.Flag
	for _, g := range groups {
		out = append(out, g...)
	}
	return out
}

// Flags of the release commands (flagYes and flagForce are shared with backup/restore).
const (
	flagDryRun           = "dry-run"
	flagTimeout          = "timeout"
	flagKeepFailed       = "keep-failed"
	flagSkipBackup       = "skip-backup"
	flagAllowPGMajor     = "allow-postgres-major-upgrade"
	flagMovePostgres     = "move-postgres"
	flagRestoreOnFailure = "restore-on-failure"
	flagResetValues      = "reset-values"
	flagKeepRelease      = "keep-release-values"
	flagPurgeData        = "purge-data"
	flagMax              = "max"
)

func timeoutFlag(what string) cli.Flag {
	return &cli.DurationFlag{Name: flagTimeout, Usage: "how long to wait for " + what + " (default: the profile's timeout, else 10m)", Category: "Release"}
}

func yesFlag(usage string) cli.Flag {
	return &cli.BoolFlag{Name: flagYes, Aliases: []string{"y"}, Usage: usage, Category: "Release"}
}

// positionalArgs returns the arguments that are not flags. urfave/cli stops
// parsing flags at the first argument, so `restore PATH --yes` would leave
// --yes as an argument: such trailing flags are applied here.
func positionalArgs(c *cli.Context) ([]string, error) {
	var pos []string
	in := c.Args().Slice()
	for i := 0; i < len(in); i++ {
		a := in[i]
		if a == "--" {
			pos = append(pos, in[i+1:]...)
			break
		}
		if len(a) < 2 || a[0] != '-' {
			pos = append(pos, a)
			continue
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		f := lookupFlag(c.Command.Flags, name)
		if f == nil {
			return nil, usageErrorf("flag provided but not defined: %s", a)
		}
		canonical := f.Names()[0]
		if _, isBool := f.(*cli.BoolFlag); isBool {
			if !hasValue {
				value = "true"
			}
		} else if !hasValue {
			if i+1 >= len(in) {
				return nil, usageErrorf("flag needs an argument: %s", a)
			}
			i++
			value = in[i]
		}
		if err := c.Set(canonical, value); err != nil {
			return nil, usageErrorf("invalid value %q for flag %s: %v", value, a, err)
		}
	}
	return pos, nil
}

func lookupFlag(flags []cli.Flag, name string) cli.Flag {
	for _, f := range flags {
		for _, n := range f.Names() {
			if n == name {
				return f
			}
		}
	}
	return nil
}

// noArgs refuses positional arguments with a usage error naming them; hint follows.
func noArgs(c *cli.Context, hint string) error {
	if c.NArg() == 0 {
		return nil
	}
	name := strings.TrimPrefix(c.Command.HelpName, c.App.Name+" ") // "backup list", not "list"
	return usageErrorf("%s takes no arguments, got %q%s", name, c.Args().Slice(), hint)
}
