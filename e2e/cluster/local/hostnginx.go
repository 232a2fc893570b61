package local

import (
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// HostNginx is what runs here for a container whose command is `nginx ... -c CONFIG`: this
// machine's nginx (Debian's) on a copy of CONFIG rewritten for the host, the HostRewrites rows
// of nginx's config. The config is the pod's own (a ConfigMap volume), so what nginx refuses,
// routes and serves is what the chart rendered.
func HostNginx(c ProgramContainer) ([]string, error) {
	argv := append(append([]string{}, c.Command...), c.Args...)
	config := ""
	for i := 0; i+1 < len(argv); i++ {
		if argv[i] == "-c" {
			config = argv[i+1]
		}
	}
	if config == "" {
		return nil, fmt.Errorf("nginx %q: no -c CONFIG", argv)
	}
	hostConfig, ok := hostPath(config, c.Mounts)
	if !ok {
		return nil, fmt.Errorf("nginx config %s is on no volume of the container", config)
	}
	in, err := os.ReadFile(hostConfig)
	if err != nil {
		return nil, err
	}
	out, err := rewriteNginxConfig(string(in), c)
	if err != nil {
		return nil, fmt.Errorf("nginx config %s: %w", config, err)
	}
	home, ok := c.Lookup("HOME")
	if !ok {
		return nil, fmt.Errorf("nginx: the container has no HOME")
	}
	rewritten := filepath.Join(home, "nginx.conf")
	if err := os.WriteFile(rewritten, []byte(out), 0o644); err != nil {
		return nil, err
	}
	bin, err := exec.LookPath("nginx")
	if err != nil {
		bin = "/usr/sbin/nginx"
		if _, serr := os.Stat(bin); serr != nil {
			return nil, fmt.Errorf("nginx is not installed on this machine (make deps installs Debian's): %w", err)
		}
	}
	// The master runs as this machine's user; its workers as that user too, so they read the
	// pod's directories as the processes that wrote them.
	return []string{bin, "-e", "stderr", "-p", home, "-c", rewritten, "-g", "user " + currentUser() + ";"}, nil
}

var (
	nginxListen   = regexp.MustCompile(`(?m)^(\s*listen\s+)(\d+)(\b[^;]*;)`)
	nginxLoopback = regexp.MustCompile(`127\.0\.0\.1:(\d+)`)
)

// rewriteNginxConfig gives nginx the pod's loopback ports (listen and upstreams) and the
// directories of the container's mounts in place of their paths.
func rewriteNginxConfig(config string, c ProgramContainer) (string, error) {
	var missing []string
	port := func(s string) string {
		n, _ := strconv.Atoi(s)
		hp := c.Port(int32(n))
		if hp == 0 {
			missing = append(missing, s)
			return s
		}
		return strconv.Itoa(hp)
	}
	// The pod's loopback first: a listen line rewritten next names a host port.
	config = nginxLoopback.ReplaceAllStringFunc(config, func(m string) string {
		return "127.0.0.1:" + port(nginxLoopback.FindStringSubmatch(m)[1])
	})
	config = nginxListen.ReplaceAllStringFunc(config, func(m string) string {
		g := nginxListen.FindStringSubmatch(m)
		return g[1] + "127.0.0.1:" + port(g[2]) + g[3]
	})
	if len(missing) > 0 {
		return "", fmt.Errorf("ports %s are no container port of the pod", strings.Join(missing, ", "))
	}
	// Longest mount path first: /tmp/plx/archives before /tmp.
	paths := make([]string, 0, len(c.Mounts))
	for p := range c.Mounts {
		paths = append(paths, p)
	}
	sort.Slice(paths, func(i, j int) bool { return len(paths[i]) > len(paths[j]) })
	pathRE := regexp.MustCompile(`(^|[\s"'])(/[^\s;"']*)`)
	rewrite := func(line string) string {
		return pathRE.ReplaceAllStringFunc(line, func(m string) string {
			g := pathRE.FindStringSubmatch(m)
			if host, ok := hostPath(g[2], c.Mounts, paths...); ok {
				return g[1] + host
			}
			return m
		})
	}
	var out, block []string
	for _, line := range strings.Split(config, "\n") {
		switch {
		case block != nil: // inside a location named by a mount path
			block = append(block, line)
			if strings.TrimSpace(line) == "}" {
				out = append(out, block[0]) // the container's URI, its paths here
				for _, l := range block[1:] {
					out = append(out, rewrite(l))
				}
				for _, l := range block { // its twin under the path here
					out = append(out, rewrite(l))
				}
				block = nil
			}
		case nginxLocation.MatchString(line):
			// A location's URI is what clients ask for: kept as it is. One named by a mount
			// path (an X-Accel-Redirect's internal alias) also gets a twin under the path
			// here, which is what the program beside it names in its redirects.
			uri := nginxLocation.FindStringSubmatch(line)[1]
			if _, ok := hostPath(uri, c.Mounts, paths...); ok {
				block = []string{line}
				continue
			}
			out = append(out, line)
		default:
			out = append(out, rewrite(line))
		}
	}
	return strings.Join(out, "\n"), nil
}

var nginxLocation = regexp.MustCompile(`^\s*location\s+(/\S*)\s*\{\s*$`)

// hostPath is path inside the container as a path on this machine, when it is on a mount.
// order, when given, is the mounts' paths longest first.
func hostPath(path string, mounts map[string]string, order ...string) (string, bool) {
	if order == nil {
		for p := range mounts {
			order = append(order, p)
		}
		sort.Slice(order, func(i, j int) bool { return len(order[i]) > len(order[j]) })
	}
	for _, mp := range order {
		if path == mp {
			return mounts[mp], true
		}
		if rest, ok := strings.CutPrefix(path, strings.TrimSuffix(mp, "/")+"/"); ok {
			host := filepath.Join(mounts[mp], rest)
			if strings.HasSuffix(path, "/") {
				host += "/" // nginx's alias and location keep their trailing slash
			}
			return host, true
		}
	}
	return "", false
}

// currentUser is this process's user name, for nginx's `user` directive.
func currentUser() string {
	if u, err := user.Current(); err == nil {
		return u.Username
	}
	return strconv.Itoa(os.Geteuid())
}
