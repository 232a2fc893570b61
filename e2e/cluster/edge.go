package cluster

import (
	"fmt"
	"strconv"
	"strings"
)

// EdgeImage is the repository of the chart's authenticating edge (templates/edge/): its pods
// run EdgeProgram here.
const EdgeImage = "quay.io/oauth2-proxy/oauth2-proxy"

// EdgeProgram runs oauth2-proxy (bin) for the edge's pods: the container's own flags, with its
// listening address on the loopback port the runner gives it. The gateway's address and the
// htpasswd file's path are variables (OAUTH2_PROXY_UPSTREAMS, OAUTH2_PROXY_HTPASSWD_FILE), so
// the usual rewrites (HostRewrites) take them to this machine.
func EdgeProgram(bin string) Program {
	return Program{
		Image: EdgeImage,
		Command: func(c ProgramContainer) ([]string, error) {
			if len(c.Command) > 0 {
				return nil, fmt.Errorf("%s: command %q: only the image's entrypoint with flags is known", EdgeImage, c.Command)
			}
			args := []string{bin}
			found := false
			for _, a := range c.Args {
				if addr, ok := strings.CutPrefix(a, "--http-address="); ok {
					_, port, err := splitPort(addr)
					if err != nil {
						return nil, fmt.Errorf("%s: %s: %w", EdgeImage, a, err)
					}
					local := c.Port(int32(port))
					if local == 0 {
						return nil, fmt.Errorf("%s: the container does not declare port %d", EdgeImage, port)
					}
					a = "--http-address=127.0.0.1:" + strconv.Itoa(local)
					found = true
				}
				args = append(args, a)
			}
			if !found {
				return nil, fmt.Errorf("%s: args %q: no --http-address", EdgeImage, c.Args)
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
