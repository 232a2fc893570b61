package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster"
)

// guardProbe runs the link guard of the chart's streams program (the part before its
// install_from_env() call) in the Python of Polyaxon's own programs, on a store and an
// archives folder it makes, and reads each path given: "<name> read <text>" or "<name> refused".
const guardProbe = `import os, sys
src = open(sys.argv[1]).read()
exec(compile(src[:src.index("\ninstall_from_env()")], "store-guard.py", "exec"))
store, arch = sys.argv[2], sys.argv[3]
install(store, arch)
for arg in sys.argv[4:]:
    name, path = arg.split("=", 1)
    op, path = path.split(":", 1) if path.startswith("rm:") else ("read", path)
    try:
        if op == "rm":
            os.remove(path)
            print(name, "removed")
        else:
            with open(path) as f:
                print(name, "read", f.read().strip())
    except PermissionError:
        print(name, "refused")
    except OSError as e:
        print(name, "error", e)
`

// TestStreamsGuardRefusesWhatLeavesTheStore: under the store, streams reads a run's own file,
// and neither a link nor a path spelt under the store that leads out of it (haupt builds one
// from an event's asset path, which a run writes): the review of issue 52 read /etc/hostname
// with "<store>/run/../../../../etc/hostname".
func TestStreamsGuardRefusesWhatLeavesTheStore(t *testing.T) {
	t.Parallel()
	venv, _ := polyaxonPrograms(t)
	root, err := cluster.RepoRoot()
	require.NoError(t, err)
	dir := t.TempDir()
	store, arch := filepath.Join(dir, "store"), filepath.Join(dir, "archives")
	outputs := filepath.Join(store, "run", "outputs")
	require.NoError(t, os.MkdirAll(outputs, 0o755))
	require.NoError(t, os.MkdirAll(arch, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(outputs, "model.txt"), []byte("weights"), 0o644))
	secret := filepath.Join(dir, "secret")
	require.NoError(t, os.WriteFile(secret, []byte("platform secret"), 0o600))
	require.NoError(t, os.Symlink(secret, filepath.Join(outputs, "link")))
	require.NoError(t, os.Symlink(dir, filepath.Join(outputs, "dir")))
	out, err := exec.Command(filepath.Join(venv, "bin", "python"), "-c", guardProbe,
		filepath.Join(root, "charts", "polyaxon", "files", "store-guard.py"), store, arch,
		"own="+filepath.Join(outputs, "model.txt"),
		"link="+filepath.Join(outputs, "link"),
		"through-a-folder-link="+filepath.Join(outputs, "dir", "secret"),
		"dot-dot-from-the-store="+filepath.Join(store, "run")+"/../../secret",
		"dot-dot-from-the-archives="+arch+"/run/../../secret",
		"outside="+secret,
		"remove-through-a-folder-link=rm:"+filepath.Join(outputs, "dir", "secret"),
		"remove-the-link-itself=rm:"+filepath.Join(outputs, "link"),
	).CombinedOutput()
	require.NoError(t, err, "%s", out)
	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		name, result, _ := strings.Cut(line, " ")
		got[name] = result
	}
	assert.Equal(t, map[string]string{
		"own":                          "read weights",
		"link":                         "refused",
		"through-a-folder-link":        "refused",
		"dot-dot-from-the-store":       "refused",
		"dot-dot-from-the-archives":    "refused",
		"outside":                      "read platform secret", // not under the store: streams' own files stay readable to it
		"remove-through-a-folder-link": "refused",
		"remove-the-link-itself":       "removed", // the link, not what it points at
	}, got)
	assert.FileExists(t, secret, "a remove through a link under the store removed what it points at")
}
