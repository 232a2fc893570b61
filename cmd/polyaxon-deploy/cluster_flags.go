package main

import "github.com/urfave/cli/v2"

// acceptClusterFlags lets every command take the cluster flags, as kubectl's commands all do:
// a script can pass the same --kubeconfig, --context, -n, --server, --as... to each command it runs. Commands
// that work without a cluster (render, version, completion, backup list, backup verify) get
// them hidden, and ignore them.
func acceptClusterFlags(cmd *cli.Command) {
	for _, f := range ignoredClusterFlags() {
		if !hasAnyName(cmd.Flags, f.Names()) {
			cmd.Flags = append(cmd.Flags, f)
		}
	}
	for _, sub := range cmd.Subcommands {
		acceptClusterFlags(sub)
	}
}

func ignoredClusterFlags() []cli.Flag {
	const usage = "accepted like on every command; not used by this one"
	return append([]cli.Flag{
		&cli.StringFlag{Name: flagKubeconfig, Usage: usage, Hidden: true},
		&cli.StringFlag{Name: flagContext, Usage: usage, Hidden: true},
		&cli.StringFlag{Name: flagNamespace, Aliases: []string{"n"}, Usage: usage, Hidden: true},
	}, accessFlags(true)...)
}

// hasAnyName reports whether a flag of flags answers to one of names.
func hasAnyName(flags []cli.Flag, names []string) bool {
	for _, n := range names {
		if lookupFlag(flags, n) != nil {
			return true
		}
	}
	return false
}
