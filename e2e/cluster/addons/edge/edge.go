package edge

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster"
	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster/local"
)

// Image is the repository of the chart's authenticating edge (templates/edge/): its pods
// run Program here.
const Image = "quay.io/oauth2-proxy/oauth2-proxy"

// Program runs oauth2-proxy (bin) for the edge's pods: the container's own flags, with its
// listening address on the loopback port the runner gives it. The gateway's address and the
// htpasswd file's path are variables (OAUTH2_PROXY_UPSTREAMS, OAUTH2_PROXY_HTPASSWD_FILE), so
// the usual rewrites (local.HostRewrites) take them to this machine.
func Program(bin string) local.Program {
	return local.Program{
		Image: Image,
		Command: func(c local.ProgramContainer) ([]string, error) {
			if len(c.Command) > 0 {
				return nil, fmt.Errorf("%s: command %q: only the image's entrypoint with flags is known", Image, c.Command)
			}
			args := []string{bin}
			found := false
			for _, a := range c.Args {
				if addr, ok := strings.CutPrefix(a, "--http-address="); ok {
					_, port, err := splitPort(addr)
					if err != nil {
						return nil, fmt.Errorf("%s: %s: %w", Image, a, err)
					}
					local := c.Port(int32(port))
					if local == 0 {
						return nil, fmt.Errorf("%s: the container does not declare port %d", Image, port)
					}
					a = "--http-address=127.0.0.1:" + strconv.Itoa(local)
					found = true
				}
				args = append(args, a)
			}
			if !found {
				return nil, fmt.Errorf("%s: args %q: no --http-address", Image, c.Args)
			}
			return args, nil
		},
	}
}

func splitPort(addr string) (string, int, error) {
	i := strings.LastIndexByte(addr, ':')
	if i < 0 {
		return "", 0, fmt.Errorf("no port in %q", addr)
	}
	p, err := strconv.Atoi(addr[i+1:])
	return addr[:i], p, err
}

// EnsureOAuth2Proxy builds oauth2-proxy from the Go module proxy (e2e/scripts/build-oauth2-proxy.sh,
// cached outside the repository) and returns the binary's path.
func EnsureOAuth2Proxy(ctx context.Context, progress io.Writer) (string, error) {
	p, err := cluster.RunBuildScript(ctx, "build-oauth2-proxy.sh", 1, progress)
	if err != nil {
		return "", err
	}
	return p[0], nil
}
