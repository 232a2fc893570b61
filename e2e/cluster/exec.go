package cluster

import (
	"bytes"
	"context"
	"fmt"
	"io"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"
)

// Exec runs cmd in a pod's container through the API server's exec subresource, as kubectl
// does (WebSocket, falling back to SPDY). On the local provider a ClusterExec decides what
// runs; on kind it runs in the container. Returns stdout and stderr.
//
// On the local provider the command's stdin is never closed (kwok v0.8.0 copies the stream
// into the process without closing it): a command fed through stdin must stop reading by
// itself, e.g. `head -c N | psql`, or it waits for EOF until ctx ends.
func (c *Cluster) Exec(ctx context.Context, namespace, pod, container string, cmd []string, stdin io.Reader) (string, string, error) {
	req := c.Clientset.CoreV1().RESTClient().Post().Resource("pods").Namespace(namespace).Name(pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{
			Container: container,
			Command:   cmd,
			Stdin:     stdin != nil,
			Stdout:    true,
			Stderr:    true,
		}, scheme.ParameterCodec)
	ws, err := remotecommand.NewWebSocketExecutor(c.RESTConfig, "GET", req.URL().String())
	if err != nil {
		return "", "", fmt.Errorf("exec in %s/%s: %w", namespace, pod, err)
	}
	spdy, err := remotecommand.NewSPDYExecutor(c.RESTConfig, "POST", req.URL())
	if err != nil {
		return "", "", fmt.Errorf("exec in %s/%s: %w", namespace, pod, err)
	}
	ex, err := remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
	if err != nil {
		return "", "", fmt.Errorf("exec in %s/%s: %w", namespace, pod, err)
	}
	var stdout, stderr bytes.Buffer
	err = ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: stdin, Stdout: &stdout, Stderr: &stderr})
	if err != nil {
		return stdout.String(), stderr.String(), fmt.Errorf("exec %q in %s/%s: %w", cmd, namespace, pod, err)
	}
	return stdout.String(), stderr.String(), nil
}
