package local

import (
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"

	"k8s.io/client-go/tools/clientcmd"
)

// The images of a run pod that RunPrograms runs here: the run's own container when its image
// is Python's (values/polyaxonfiles/hello-job.yaml's python:3.11-slim), and Polyaxon's sidecar,
// which uploads the run's outputs and logs to the artifacts store.
const (
	RunPythonImage = "python"
	SidecarImage   = "polyaxon/polyaxon-sidecar"
)

// The paths Polyaxon's code fixes in run pods (cli polyaxon/_contexts/paths.py; kubernetes_asyncio
// config/incluster_config.py).
const (
	contextArtifactsPath   = "/plx-context/artifacts"
	serviceAccountMountDir = "/var/run/secrets/kubernetes.io/serviceaccount"
)

// RunProgramTable is RunPrograms as docs/development.md shows it (a test keeps them equal).
var RunProgramTable = []PolyaxonProgram{
	{SidecarImage, "a run pod's sidecar (command `polyaxon sidecar`, or the chart's guarded `python -c <guard>`; args `--container-id=<main> --sleep-interval --sync-interval ...`)",
		"the venv's `python -c <sidecar>`: kubernetes_asyncio's in-cluster config taken from the pod's ServiceAccount files, then `polyaxon sidecar` (or the pod's guard program) with the container's args; a native sidecar (an init container that restarts Always), it runs until SIGTERM, sent once the main container ended, then syncs one last time and exits", "`POLYAXON_SERVICE=sidecar`: the `sidecar` command exists only then"},
	{RunPythonImage, "a run's own container (`python ...`)",
		"this machine's `python3` with the container's arguments", "-"},
}

// RunPrograms run a run pod's processes here (opt-in: without them run pods are kwok's, marked
// Running and then Complete): its main container when the run's image is Python's, and
// Polyaxon's sidecar from the virtual environment venvs gives for the image's tag, a native
// sidecar (hostcompanions.go) that gets SIGTERM once the main container ended. Polyaxon's
// other init containers (their `/bin/sh -c` scripts name the container's paths) are not run:
// the artifacts context starts empty, as for a run that has no earlier artifacts.
func RunPrograms(venvs Venvs) []Program {
	return []Program{
		{
			Image:             SidecarImage,
			ImageEnv:          []EnvVar{{"POLYAXON_SERVICE", "sidecar"}},
			HostEnv:           sidecarHostEnv,
			AwaitsTermHandler: true,
			Command: func(c ProgramContainer) ([]string, error) {
				guarded := len(c.Command) == 3 && c.Command[0] == "python" && c.Command[1] == "-c"
				if !guarded && (len(c.Command) != 2 || c.Command[0] != "polyaxon" || c.Command[1] != "sidecar") {
					return nil, fmt.Errorf("%s: command %q: only `polyaxon sidecar` and `python -c <the chart's sidecar guard>` are known", SidecarImage, c.Command)
				}
				sa := c.Mounts[serviceAccountMountDir]
				if sa == "" {
					return nil, fmt.Errorf("%s: the pod has no ServiceAccount token mount: the sidecar reads its pod through the API", SidecarImage)
				}
				venv, err := venvs(c.Tag())
				if err != nil {
					return nil, err
				}
				start := []string{filepath.Join(venv, "bin", "python"), "-c", sidecarStart, filepath.Join(sa, "token"), filepath.Join(sa, "ca.crt")}
				if guarded {
					return append(append(start, "--program", c.Command[2]), c.Args...), nil
				}
				return append(append(start, "sidecar"), c.Args...), nil
			},
		},
		{
			Image: RunPythonImage,
			Command: func(c ProgramContainer) ([]string, error) {
				if !isPython(c.Command) {
					return nil, fmt.Errorf("%s: command %q: only `python ...` is known", RunPythonImage, c.Command)
				}
				python, err := exec.LookPath("python3")
				if err != nil {
					return nil, fmt.Errorf("%s: this machine's python3: %w", RunPythonImage, err)
				}
				return append(append([]string{python}, c.Command[1:]...), c.Args...), nil
			},
		},
	}
}

// sidecarStart runs Polyaxon's CLI with kubernetes_asyncio's in-cluster config read from
// argv[1] (the token) and argv[2] (the CA) instead of its fixed /var/run/secrets paths: the
// sidecar loads the in-cluster config whatever POLYAXON_K8S_IN_CLUSTER says
// (polyaxon/_sidecar/container/__init__.py), and the API server's address comes from
// KUBERNETES_SERVICE_HOST and _PORT (sidecarHostEnv). With `--program P`, it runs the pod's
// own `python -c P` program (the chart's guarded sidecar, which reads the run's logs there
// when it can) with the arguments that follow.
const sidecarStart = `import sys
from kubernetes_asyncio.config import incluster_config
incluster_config.SERVICE_TOKEN_FILENAME, incluster_config.SERVICE_CERT_FILENAME = sys.argv[1], sys.argv[2]
if sys.argv[3] == "--program":
    program, sys.argv = sys.argv[4], ["-c"] + sys.argv[5:]
    exec(compile(program, "<string>", "exec"), {"__name__": "__main__"})
    sys.exit(0)
sys.argv = ["polyaxon"] + sys.argv[3:]
from polyaxon.cli import cli
sys.exit(cli())
`

// sidecarHostEnv gives the sidecar what it reads of the pod's in the container's own places:
// POLYAXON_CONTEXT_ROOT, a directory of the pod whose artifacts/ is the volume mounted at
// /plx-context/artifacts (Polyaxon fixes that path unless this variable says otherwise), and
// the API server's address for the in-cluster config (KUBERNETES_SERVICE_HOST and _PORT, from
// the pod's kubeconfig).
func sidecarHostEnv(c ProgramContainer) ([]EnvVar, error) {
	artifacts := c.Mounts[contextArtifactsPath]
	if artifacts == "" {
		return nil, fmt.Errorf("%s: nothing is mounted at %s", SidecarImage, contextArtifactsPath)
	}
	home, _ := c.Lookup("HOME")
	kubeconfig, _ := c.Lookup("KUBECONFIG")
	if home == "" || kubeconfig == "" {
		return nil, fmt.Errorf("%s: no HOME or KUBECONFIG for the pod", SidecarImage)
	}
	root := filepath.Join(home, "plx-context")
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, err
	}
	link := filepath.Join(root, "artifacts")
	if err := os.Remove(link); err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	if err := os.Symlink(artifacts, link); err != nil {
		return nil, err
	}
	cfg, err := clientcmd.LoadFromFile(kubeconfig)
	if err != nil {
		return nil, err
	}
	ctx := cfg.Contexts[cfg.CurrentContext]
	if ctx == nil || cfg.Clusters[ctx.Cluster] == nil {
		return nil, fmt.Errorf("%s: kubeconfig %s names no cluster", SidecarImage, kubeconfig)
	}
	server, err := url.Parse(cfg.Clusters[ctx.Cluster].Server)
	if err != nil {
		return nil, err
	}
	return []EnvVar{
		{"POLYAXON_CONTEXT_ROOT", root},
		{"KUBERNETES_SERVICE_HOST", server.Hostname()},
		{"KUBERNETES_SERVICE_PORT", server.Port()},
	}, nil
}
