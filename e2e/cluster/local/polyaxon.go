package local

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/contract/polyaxonkeys"
)

// PolyaxonProgram names what runs here for one of Polyaxon's images, for the README's table.
type PolyaxonProgram struct{ Image, Containers, Runs, ImageSets string }

// The images whose containers run Polyaxon's own programs (PolyaxonPrograms). Their
// entrypoints are not public: what each runs is read from Polyaxon's sources
// (../shared/design/POLYAXON-RUNTIME.md) and the chart's args.
const (
	APIImage      = "polyaxon/polyaxon-api"
	AgentImage    = "polyaxon/polyaxon-agent"
	OperatorImage = "polyaxon/polyaxon-operator"
)

// PolyaxonProgramTable is PolyaxonPrograms as the README shows it (a test keeps them equal).
var PolyaxonProgramTable = []PolyaxonProgram{
	{APIImage, "gateway and streams (command `python -c <start>`, args `<host> <port>`: haupt's start_app for the API or streams, without migrations)", "the venv's `python -c <start> 127.0.0.1 <port> 1` (one worker)", "`POLYAXON_SERVICE=api` (the streams container sets `streams`)"},
	{APIImage, "proxy (command `nginx -e stderr -c <config>`)", "this machine's nginx (Debian's) with the config rewritten for the pod's loopback ports and directories (`HostNginx`)", ""},
	{APIImage, "a container with neither command nor args (another chart's API)", "`haupt server --host 127.0.0.1 --port <port> --workers 1`, which migrates first", "`POLYAXON_SERVICE=api`: without it those migrations fail"},
	{APIImage, "migrations, admin user (args `migrate`, `shell -- --command <createuser call>`); the migration Job's init container `wait-for-database` (command `python -c <wait>`)", "`haupt manage -c <args>`; a `python` command is the venv's `python` with the same arguments", "`POLYAXON_SERVICE=api`"},
	{AgentImage, "agent (args `start`); the init container `wait-for-api` of the agent and operator pods (command `python -c <wait>`)", "`polyaxon agent start`; its probe `./entrypoint.sh healthz` is `polyaxon agent healthz`; a `python` command is the venv's `python` with the same arguments", "`POLYAXON_SERVICE=agent`: the `agent` command exists only then"},
	{OperatorImage, "operator", "our stand-in (`e2e/cmd/polyaxon-operator`): the operator's 2.12+ source and binary are not published", ""},
}

// Venvs finds the virtual environment with the programs of a Polyaxon version: the tag of the
// container's image, so that an upgrade's new pods run the new version and the old pods the old.
type Venvs func(version string) (string, error)

// InstalledVenvs are the environments e2e/scripts/install-polyaxon.sh made: one per version.
func InstalledVenvs(version string) (string, error) {
	venv := PolyaxonVenv(version)
	if _, err := os.Stat(filepath.Join(venv, "bin", "haupt")); err != nil {
		return "", fmt.Errorf("Polyaxon %s's programs are not installed in %s: run e2e/scripts/install-polyaxon.sh %s (make deps installs every version under e2e/polyaxon): %w", version, venv, version, err)
	}
	return venv, nil
}

// PolyaxonPrograms are the programs of Polyaxon's platform images: the API, migrations and
// admin user from haupt, the agent from polyaxon, both from the virtual environment venvs
// gives for the image's tag, and operator, the stand-in's binary.
func PolyaxonPrograms(venvs Venvs, operator string) []Program {
	bin := func(c ProgramContainer, n string) (string, error) {
		venv, err := venvs(c.Tag())
		return filepath.Join(venv, "bin", n), err
	}
	return []Program{
		{
			Image:        APIImage,
			ImageEnv:     []EnvVar{{"POLYAXON_SERVICE", "api"}},
			EnvOverrides: map[string]string{"POLYAXON_UI_IN_SANDBOX": "true", "POLYAXON_UI_OFFLINE": "true"},
			Command: func(c ProgramContainer) ([]string, error) {
				haupt, err := bin(c, "haupt")
				if err != nil {
					return nil, err
				}
				if isPython(c.Command) {
					python := filepath.Join(filepath.Dir(haupt), "python")
					args, err := hauptStartArgs(c)
					if err != nil {
						return nil, err
					}
					return append(append([]string{python}, c.Command[1:]...), args...), nil
				}
				if len(c.Command) > 0 && c.Command[0] == "nginx" {
					return HostNginx(c)
				}
				if len(c.Command) > 0 {
					return nil, fmt.Errorf("%s: command %q: only `python ...` is known", APIImage, c.Command)
				}
				if len(c.Args) > 0 {
					return append([]string{haupt, "manage", "-c"}, c.Args...), nil
				}
				// Neither: the image's own start, `haupt server`, which migrates first (a chart
				// other than ours, e.g. Polyaxon's own).
				port := c.Port(8000)
				if port == 0 {
					return nil, fmt.Errorf("%s: the container does not declare port 8000", APIImage)
				}
				return []string{haupt, "server", "--host", "127.0.0.1", "--port", strconv.Itoa(port), "--workers", "1"}, nil
			},
		},
		{
			Image:        AgentImage,
			ImageEnv:     []EnvVar{{"POLYAXON_SERVICE", "agent"}},
			EnvOverrides: map[string]string{"POLYAXON_K8S_IN_CLUSTER": "false"},
			Command: func(c ProgramContainer) ([]string, error) {
				if isPython(c.Command) {
					python, err := bin(c, "python")
					return append(append([]string{python}, c.Command[1:]...), c.Args...), err
				}
				if len(c.Args) != 1 || c.Args[0] != "start" {
					return nil, fmt.Errorf("%s: args %q: only `start` is known", AgentImage, c.Args)
				}
				polyaxon, err := bin(c, "polyaxon")
				return []string{polyaxon, "agent", "start"}, err
			},
			ExecProbe: func(c ProgramContainer, probe []string) ([]string, error) {
				if n := len(probe); n == 0 || probe[n-1] != "healthz" {
					return nil, fmt.Errorf("%s: probe %q: only `./entrypoint.sh healthz` is known", AgentImage, probe)
				}
				polyaxon, err := bin(c, "polyaxon")
				return []string{polyaxon, "agent", "healthz"}, err
			},
		},
		{
			Image: OperatorImage,
			Command: func(ProgramContainer) ([]string, error) {
				return []string{operator}, nil
			},
		},
	}
}

// isPython says whether a container's command runs the image's Python (`python ...`,
// `python3 ...`): here it is the venv's, with the same arguments.
func isPython(command []string) bool {
	return len(command) > 0 && (command[0] == "python" || command[0] == "python3")
}

// PolyaxonVenv is where e2e/scripts/install-polyaxon.sh installs Polyaxon version's programs.
func PolyaxonVenv(version string) string { return polyaxonkeys.VenvDir(version) }

// hauptStartArgs are the arguments of a container that starts haupt with `python -c <start>`:
// HOST PORT [WORKERS] (the chart's gateway/_start.tpl and _proxy.tpl) become the loopback port
// that stands for PORT and one worker; other arguments (a wait script's) are kept.
func hauptStartArgs(c ProgramContainer) ([]string, error) {
	if len(c.Args) < 2 {
		return c.Args, nil
	}
	port, err := strconv.Atoi(c.Args[1])
	if err != nil || c.Port(int32(port)) == 0 {
		return c.Args, nil
	}
	if len(c.Args) > 3 {
		return nil, fmt.Errorf("%s: haupt's start args %q: want HOST PORT [WORKERS]", APIImage, c.Args)
	}
	return []string{"127.0.0.1", strconv.Itoa(c.Port(int32(port))), "1"}, nil
}
