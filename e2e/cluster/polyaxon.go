package cluster

import (
	"fmt"
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
	{APIImage, "gateway", "`haupt server --host 127.0.0.1 --port <port> --workers 1`", "`POLYAXON_SERVICE=api`: without it the migrations `haupt server` runs first fail"},
	{APIImage, "migrations, admin user (args `migrate`, `shell -- --command <createuser call>`)", "`haupt manage -c <args>`", "`POLYAXON_SERVICE=api`"},
	{AgentImage, "agent (args `start`)", "`polyaxon agent start`; its probe `./entrypoint.sh healthz` is `polyaxon agent healthz`", "`POLYAXON_SERVICE=agent`: the `agent` command exists only then"},
	{OperatorImage, "operator", "our stand-in (`e2e/cmd/polyaxon-operator`): the operator's 2.12+ source and binary are not published", ""},
}

// PolyaxonPrograms are the programs of Polyaxon's platform images: the API, migrations and
// admin user from haupt, the agent from polyaxon, both in the virtual environment venv
// (e2e/scripts/install-polyaxon.sh), and operator, the stand-in's binary.
func PolyaxonPrograms(venv, operator string) []Program {
	bin := func(n string) string { return filepath.Join(venv, "bin", n) }
	return []Program{
		{
			Image:        APIImage,
			ImageEnv:     []EnvVar{{"POLYAXON_SERVICE", "api"}},
			EnvOverrides: map[string]string{"POLYAXON_UI_IN_SANDBOX": "true", "POLYAXON_UI_OFFLINE": "true"},
			Command: func(c ProgramContainer) ([]string, error) {
				if len(c.Args) > 0 {
					return append([]string{bin("haupt"), "manage", "-c"}, c.Args...), nil
				}
				port := c.Port(8000)
				if port == 0 {
					return nil, fmt.Errorf("%s: the container does not declare port 8000", APIImage)
				}
				return []string{bin("haupt"), "server", "--host", "127.0.0.1", "--port", strconv.Itoa(port), "--workers", "1"}, nil
			},
		},
		{
			Image:        AgentImage,
			ImageEnv:     []EnvVar{{"POLYAXON_SERVICE", "agent"}},
			EnvOverrides: map[string]string{"POLYAXON_K8S_IN_CLUSTER": "false"},
			Command: func(c ProgramContainer) ([]string, error) {
				if len(c.Args) != 1 || c.Args[0] != "start" {
					return nil, fmt.Errorf("%s: args %q: only `start` is known", AgentImage, c.Args)
				}
				return []string{bin("polyaxon"), "agent", "start"}, nil
			},
			ExecProbe: func(_ ProgramContainer, probe []string) ([]string, error) {
				if n := len(probe); n == 0 || probe[n-1] != "healthz" {
					return nil, fmt.Errorf("%s: probe %q: only `./entrypoint.sh healthz` is known", AgentImage, probe)
				}
				return []string{bin("polyaxon"), "agent", "healthz"}, nil
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

// PolyaxonVenv is where e2e/scripts/install-polyaxon.sh installs Polyaxon version's programs.
func PolyaxonVenv(version string) string { return polyaxonkeys.VenvDir(version) }
