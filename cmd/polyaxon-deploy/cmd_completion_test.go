package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// actAsCLIEnv makes the test binary behave as polyaxon-deploy (see TestMain), so a real shell
// can call "the binary" while completing, without a separate build.
const actAsCLIEnv = "POLYAXON_DEPLOY_TEST_ACT_AS_CLI"

func TestMain(m *testing.M) {
	if os.Getenv(actAsCLIEnv) == "1" {
		os.Exit(run(context.Background(), os.Args, os.Stdout, os.Stderr))
	}
	// A failing command leaves its debug log in TMPDIR for the user; the tests' failing
	// commands leave theirs in a directory removed afterwards, not in /tmp.
	tmp, err := os.MkdirTemp("", "polyaxon-deploy-cmd-tests-")
	if err == nil {
		err = os.Chmod(tmp, 0o755) // PostgreSQL's test servers run as another user under it
	}
	if err != nil {
		panic(err)
	}
	os.Setenv("TMPDIR", tmp)
	code := m.Run()
	os.RemoveAll(tmp)
	os.Exit(code)
}

// cliOnPath puts an executable named polyaxon-deploy (this test binary acting as the CLI) in
// a directory and returns it.
func cliOnPath(t *testing.T) string {
	t.Helper()
	self, err := os.Executable()
	require.NoError(t, err)
	dir := t.TempDir()
	require.NoError(t, os.Symlink(self, filepath.Join(dir, "polyaxon-deploy")))
	return dir
}

// complete loads `polyaxon-deploy completion bash` into a real bash and asks the completion
// function for the candidates of line (the word under the cursor is the last one; a trailing
// space starts a new, empty word), as bash does on <TAB>.
func complete(t *testing.T, line string) []string {
	t.Helper()
	r := runCLI(t, nil, "completion", "bash")
	require.Equal(t, 0, r.code, r.stderr)
	script := filepath.Join(t.TempDir(), "polyaxon-deploy.bash")
	require.NoError(t, os.WriteFile(script, []byte(r.stdout), 0o600))

	words := strings.Fields(line)
	if strings.HasSuffix(line, " ") {
		words = append(words, "")
	}
	driver := `source "$1"
COMP_WORDS=("${@:2}")
COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))
spec=$(complete -p polyaxon-deploy) || exit 3
fn=${spec#*-F }; fn=${fn%% *}
"$fn"
printf '%s\n' "${COMPREPLY[@]}"`
	cmd := exec.Command("bash", append([]string{"--norc", "--noprofile", "-c", driver, "bash", script}, words...)...)
	cmd.Env = append(os.Environ(), actAsCLIEnv+"=1", "PATH="+cliOnPath(t)+":"+os.Getenv("PATH"), "TMPDIR="+t.TempDir())
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "bash completion:\n%s", out)
	return strings.Fields(string(out))
}

func TestBashCompletionInRealBash(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Fatalf("bash is needed for this test: %v", err)
	}
	t.Run("command prefix", func(t *testing.T) {
		assert.Equal(t, []string{"backup"}, complete(t, "polyaxon-deploy ba"))
	})
	t.Run("every command", func(t *testing.T) {
		got := complete(t, "polyaxon-deploy ")
		for _, cmd := range commands() {
			assert.Contains(t, got, cmd.Name)
		}
	})
	t.Run("subcommands", func(t *testing.T) {
		assert.ElementsMatch(t, []string{"verify"}, complete(t, "polyaxon-deploy backup ve"))
	})
	t.Run("flags of the command", func(t *testing.T) {
		assert.Equal(t, []string{"--skip-backup"}, complete(t, "polyaxon-deploy upgrade --skip-b"))
	})
}

func TestCompletionScripts(t *testing.T) {
	for shell, want := range map[string]string{
		"bash": "complete -o bashdefault -o default -F _polyaxon_deploy_complete polyaxon-deploy",
		"zsh":  "compdef _polyaxon_deploy_complete polyaxon-deploy",
		"fish": "complete -c polyaxon-deploy",
	} {
		t.Run(shell, func(t *testing.T) {
			r := runCLI(t, nil, "completion", shell)
			require.Equal(t, 0, r.code, r.stderr)
			assert.Contains(t, r.stdout, want)
		})
	}
	r := runCLI(t, nil, "completion", "powershell")
	assert.Equal(t, ExitUsage, r.code)
	assert.Contains(t, r.stderr, "bash, zsh or fish")
	assert.Equal(t, ExitUsage, runCLI(t, nil, "completion").code)
}
