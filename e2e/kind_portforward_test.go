package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster"
)

// kindPortForward forwards a local port to target's port through kubectl and returns its URL.
// kubectl port-forward exits when one forwarded connection ends in an error (a reset by the
// pod's side: a stream cut short), which would refuse every later request of the test; so it is
// started again on the same local port, each exit logged with what kubectl said.
func kindPortForward(t *testing.T, c *cluster.Cluster, ns, target string, port int) string {
	t.Helper()
	kubectl, err := kubeBinaries()
	require.NoError(t, err)
	local := freeLoopbackPort(t)
	var (
		mu      sync.Mutex
		current *exec.Cmd
		done    bool
	)
	start := func() (*exec.Cmd, *syncBuffer, error) {
		out := &syncBuffer{}
		cmd := exec.Command(filepath.Join(kubectl, "kubectl"), "--kubeconfig", c.KubeconfigPath, "-n", ns,
			"port-forward", "--address", "127.0.0.1", target, fmt.Sprintf("%d:%d", local, port))
		cmd.Stdout, cmd.Stderr = out, out
		mu.Lock()
		defer mu.Unlock()
		if done {
			return nil, nil, errors.New("stopped")
		}
		current = cmd
		return cmd, out, cmd.Start()
	}
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		for restarts := 0; ; restarts++ {
			cmd, out, err := start()
			if cmd == nil {
				return
			}
			if err == nil {
				err = cmd.Wait()
			}
			mu.Lock()
			stop := done
			mu.Unlock()
			if stop {
				return
			}
			t.Logf("kubectl port-forward %s/%s :%d exited (%v), started again: %s", ns, target, local, err, lastLines(out.String(), 3))
			time.Sleep(500 * time.Millisecond)
		}
	}()
	t.Cleanup(func() {
		mu.Lock()
		done = true
		if current != nil && current.Process != nil {
			_ = current.Process.Kill()
		}
		mu.Unlock()
		<-exited
	})
	addr := fmt.Sprintf("127.0.0.1:%d", local)
	waitFor(t, time.Minute, "kubectl port-forward "+target+" listening on "+addr, func(ctx context.Context) (bool, string, error) {
		conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		if err != nil {
			return false, err.Error(), nil
		}
		return true, "", conn.Close()
	})
	return "http://" + addr
}

// resendingClient is client whose requests, when they find kindPortForward's kubectl between an
// exit and its restart (refused, reset, or cut before any answer), are sent again for up to a
// minute. Only the forwarding is retried: any answer, even an error status, is returned as is.
func resendingClient(client *http.Client) *http.Client {
	base := client.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	c := *client
	c.Transport = resending{base: base}
	return &c
}

type resending struct{ base http.RoundTripper }

func (r resending) RoundTrip(req *http.Request) (*http.Response, error) {
	deadline := time.Now().Add(time.Minute)
	for {
		resp, err := r.base.RoundTrip(req)
		if err == nil || !forwardingCut(err) || time.Now().After(deadline) || (req.Body != nil && req.GetBody == nil) {
			return resp, err
		}
		select {
		case <-req.Context().Done():
			return nil, err
		case <-time.After(time.Second):
		}
		if req.GetBody != nil {
			body, berr := req.GetBody()
			if berr != nil {
				return nil, berr
			}
			req = req.Clone(req.Context())
			req.Body = body
		}
	}
}

// forwardingCut is an error of a connection that kubectl port-forward refused or dropped. A drop
// seen while the body is still being written surfaces as a broken pipe, or as the transport's own
// close of the connection (net.ErrClosed) once its reader saw the end first; a drop seen before
// the request was written, as net/http's unexported errServerClosedIdle, known by its text only.
func forwardingCut(err error) bool {
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		strings.Contains(err.Error(), "http: server closed idle connection")
}
