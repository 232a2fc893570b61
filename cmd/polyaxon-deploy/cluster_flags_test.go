package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/urfave/cli/v2"
)

// TestEveryCommandTakesTheClusterFlags runs every command and subcommand with the cluster flags
// (before and after its arguments): none rejects them as a usage error. Commands that need a
// cluster use them (the error names the kubeconfig given); the others ignore them and succeed.
func TestEveryCommandTakesTheClusterFlags(t *testing.T) {
	backups := t.TempDir()
	// Arguments each command needs; the cluster-free ones must then succeed.
	args := map[string][]string{
		"render":         {"--values-only"},
		"backup list":    {"--dir", backups},
		"backup verify":  {backups + "/no-such-backup"},
		"restore":        {backups + "/no-such-backup", "--yes"},
		"completion":     {"bash"},
		"check":          {"--pre"},
		"plan":           {"--no-release"},
		"uninstall":      {"--yes"},
		"recover":        {"--yes"},
		"upgrade":        {"--skip-backup", "--yes"},
		"version":        nil,
		"backup":         nil,
		"install":        nil,
		"status":         nil,
		"history":        nil,
		"rollback":       nil,
		"convert-values": {"../../installer/convert/testdata/official-values-example.yaml"},
		"adopt":          {"--from-release", "plx"},
	}
	clusterFree := map[string]bool{"render": true, "backup list": true, "completion": true, "version": true, "convert-values": true}
	cluster := []string{"--kubeconfig", "/nonexistent/kubeconfig", "--context", "no-such-context", "-n", "elsewhere"}

	var walk func(prefix string, cmds []*cli.Command)
	seen := 0
	walk = func(prefix string, cmds []*cli.Command) {
		for _, cmd := range cmds {
			name := strings.TrimSpace(prefix + " " + cmd.Name)
			walk(name, cmd.Subcommands)
			seen++
			extra, ok := args[name]
			if !ok {
				t.Errorf("command %q has no entry in this test: add the arguments it needs", name)
				continue
			}
			for _, placement := range []string{"before", "after"} {
				t.Run(name+" flags "+placement+" args", func(t *testing.T) {
					full := append(strings.Fields(name), cluster...)
					full = append(full, extra...)
					if placement == "after" {
						full = append(append(strings.Fields(name), extra...), cluster...)
					}
					r := runCLI(t, nil, full...)
					assert.NotContains(t, r.stderr, "flag provided but not defined")
					assert.NotEqual(t, ExitUsage, r.code, "usage error:\n%s", r.stderr)
					if clusterFree[name] {
						assert.Equal(t, ExitOK, r.code, "the cluster flags are ignored:\n%s", r.stderr)
						return
					}
					if !strings.Contains(name, "backup verify") && name != "restore" {
						assert.Contains(t, r.stdout+r.stderr, "/nonexistent/kubeconfig", "the command used --kubeconfig")
					}
				})
			}
		}
	}
	walk("", commands())
	assert.Greater(t, seen, 14)
}
