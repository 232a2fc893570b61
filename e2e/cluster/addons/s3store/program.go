package s3store

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster"
	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster/local"
)

// Program runs versitygw (bin, build-s3store.sh's) for the store's pods on the local provider:
// the container's own flags, where a listening address (--port, --admin-port: ":7070") becomes
// the loopback port that stands for that container port, and a directory the container mounts
// (the emptyDirs /data, /meta, /iam) the volume's directory here. The root keys come from the
// container's environment (its envFrom), as in the cluster.
func Program(bin string) local.Program {
	return local.Program{
		Image: ImageRepository,
		Command: func(c local.ProgramContainer) ([]string, error) {
			if len(c.Command) > 0 {
				return nil, fmt.Errorf("%s: command %q: only the image's entrypoint with flags is known", ImageRepository, c.Command)
			}
			return hostArgs(bin, c)
		},
	}
}

// listenFlags are versitygw's flags whose value is an address it listens on.
var listenFlags = map[string]bool{"--port": true, "--admin-port": true}

func hostArgs(bin string, c local.ProgramContainer) ([]string, error) {
	args := []string{bin}
	listens := false
	for i := 0; i < len(c.Args); i++ {
		a := c.Args[i]
		flag, value, inline := strings.Cut(a, "=")
		if listenFlags[flag] {
			if !inline {
				if i+1 == len(c.Args) {
					return nil, fmt.Errorf("%s: %s without a value", ImageRepository, flag)
				}
				i++
				value = c.Args[i]
			}
			addr, err := loopback(c, value)
			if err != nil {
				return nil, fmt.Errorf("%s: %s %s: %w", ImageRepository, flag, value, err)
			}
			args = append(args, flag, addr)
			listens = listens || flag == "--port"
			continue
		}
		args = append(args, mountedPath(c, a))
	}
	if !listens {
		return nil, fmt.Errorf("%s: args %q: no --port", ImageRepository, c.Args)
	}
	return args, nil
}

// loopback is the address here for a listening address of the container ("[host]:port").
func loopback(c local.ProgramContainer, addr string) (string, error) {
	i := strings.LastIndexByte(addr, ':')
	if i < 0 {
		return "", fmt.Errorf("no port")
	}
	port, err := strconv.Atoi(addr[i+1:])
	if err != nil {
		return "", err
	}
	hp := c.Port(int32(port))
	if hp == 0 {
		return "", fmt.Errorf("the container does not declare port %d", port)
	}
	return "127.0.0.1:" + strconv.Itoa(hp), nil
}

// mountedPath is arg with a mount path of the container (or a path under one) as the volume's
// directory here; any other argument is kept.
func mountedPath(c local.ProgramContainer, arg string) string {
	if !strings.HasPrefix(arg, "/") {
		return arg
	}
	best := ""
	for m := range c.Mounts {
		if (arg == m || strings.HasPrefix(arg, strings.TrimSuffix(m, "/")+"/")) && len(m) > len(best) {
			best = m
		}
	}
	if best == "" {
		return arg
	}
	return filepath.Join(c.Mounts[best], strings.TrimPrefix(arg, best))
}

// LocalForward reaches a Service port on the local provider: the loopback listener that the
// host programs use (local.ServiceAddress).
func LocalForward(c *cluster.Cluster) Forward {
	return func(_ context.Context, namespace, service string, port int32) (string, error) {
		return local.ServiceAddress(c, namespace, service, port)
	}
}

// LocalDataDir is, on the local provider, the directory here of the store's /data volume:
// bucket B's object KEY is the file <dir>/B/KEY.
func (s *Store) LocalDataDir(ctx context.Context) (string, error) {
	p, err := s.Pod(ctx)
	if err != nil {
		return "", err
	}
	dir := local.PodVolumeDir(s.c, p, "data")
	if dir == "" {
		return "", fmt.Errorf("cluster %s: the store's files are on this machine on the local provider only", s.c.Name)
	}
	return dir, nil
}
