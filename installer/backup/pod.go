package backup

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/streaming/pkg/httpstream"
)

// Execer runs a command in a container, streaming stdio (kubectl exec).
type Execer interface {
	Exec(ctx context.Context, namespace, pod, container string, command []string, stdio Stdio) error
}

// ExitCoder is implemented by Execer errors carrying the command's exit
// code (client-go's exec.CodeExitError does).
type ExitCoder interface{ ExitStatus() int }

type remoteExecer struct {
	config *rest.Config
	client kubernetes.Interface
}

// NewExecer execs through the API server with client-go's remotecommand:
// websocket first, SPDY when the server or a proxy cannot upgrade to it.
func NewExecer(config *rest.Config, client kubernetes.Interface) Execer {
	return &remoteExecer{config: config, client: client}
}

func (e *remoteExecer) Exec(ctx context.Context, namespace, pod, container string, command []string, stdio Stdio) error {
	req := e.client.CoreV1().RESTClient().Post().
		Resource("pods").Namespace(namespace).Name(pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{
			Container: container,
			Command:   command,
			Stdin:     stdio.Stdin != nil,
			Stdout:    stdio.Stdout != nil,
			Stderr:    stdio.Stderr != nil,
		}, scheme.ParameterCodec)
	spdy, err := remotecommand.NewSPDYExecutor(e.config, "POST", req.URL())
	if err != nil {
		return fmt.Errorf("exec in pod %s/%s: %w", namespace, pod, err)
	}
	ws, err := remotecommand.NewWebSocketExecutor(e.config, "GET", req.URL().String())
	if err != nil {
		return fmt.Errorf("exec in pod %s/%s: %w", namespace, pod, err)
	}
	ex, err := remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
	if err != nil {
		return fmt.Errorf("exec in pod %s/%s: %w", namespace, pod, err)
	}
	return ex.StreamWithContext(ctx, remotecommand.StreamOptions{
		Stdin: stdio.Stdin, Stdout: stdio.Stdout, Stderr: stdio.Stderr,
	})
}

// podScript runs "$0" "$@" (the tool and its flags) with the connection
// taken from the container's environment: the password travels from
// POSTGRES_PASSWORD to PGPASSWORD inside the container and is never part of
// the command sent to the API server. PGHOST/PGPORT, when set in the
// container, are honoured by the tools themselves.
const podScript = `if [ -n "${POSTGRES_PASSWORD:-}" ]; then PGPASSWORD="$POSTGRES_PASSWORD"; export PGPASSWORD; fi
exec "$0" -U "${POSTGRES_USER:-postgres}" -d "${POSTGRES_DB:-${POSTGRES_USER:-postgres}}" "$@"`

// PodCommand is the command a PodTarget execs for tool and args.
func PodCommand(tool string, args []string) []string {
	if !NeedsConnection(tool, args) {
		return append([]string{tool}, args...)
	}
	return append([]string{"sh", "-c", podScript, tool}, args...)
}

// PodTarget runs the PostgreSQL client programs inside a container whose
// environment holds POSTGRES_USER, POSTGRES_DB and POSTGRES_PASSWORD: the
// chart's postgresql container, or the client pod of an external database.
type PodTarget struct {
	execer    Execer
	namespace string
	pod       string
	container string
	kind      string
}

// NewPodTarget returns a target that execs in namespace/pod/container.
// kind is SourceInCluster or SourceExternal (recorded in manifests).
func NewPodTarget(ex Execer, namespace, pod, container, kind string) *PodTarget {
	return &PodTarget{execer: ex, namespace: namespace, pod: pod, container: container, kind: kind}
}

func (t *PodTarget) Kind() string { return t.kind }
func (t *PodTarget) String() string {
	return fmt.Sprintf("pod %s/%s container %s", t.namespace, t.pod, t.container)
}

func (t *PodTarget) Run(ctx context.Context, tool string, args []string, stdio Stdio) error {
	err := t.execer.Exec(ctx, t.namespace, t.pod, t.container, PodCommand(tool, args), stdio)
	if err == nil {
		return nil
	}
	var ec ExitCoder
	if errors.As(err, &ec) {
		return fmt.Errorf("%s exited with code %d in %s", tool, ec.ExitStatus(), t)
	}
	return fmt.Errorf("%s in %s: %w", tool, t, err)
}

// cores asks the container how many CPUs it may run on (nproc, without the database
// connection's wrapper).
func (t *PodTarget) cores(ctx context.Context) (int, error) {
	var out bytes.Buffer
	if err := t.execer.Exec(ctx, t.namespace, t.pod, t.container, []string{"nproc"}, Stdio{Stdout: &out}); err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(out.String()))
}
