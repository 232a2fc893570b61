// Command kind-runc is an OCI runtime that removes from a container's spec the capabilities
// its own bounding set lacks (and, without CAP_SYS_RESOURCE, raises an oomScoreAdj below its
// own to its own) and then runs runc with the same arguments. Registered as the
// default runtime of the private dockerd that hosts kind's nodes, and as the runc BinaryName of
// the containerd inside each node, so that privileged containers start on a machine whose
// bounding set lacks CAP_SYS_RESOURCE (docs/kind-offline.md).
//
// The real runc is $KIND_RUNC_REAL, else the first of /usr/local/sbin/runc, /usr/sbin/runc,
// /usr/bin/runc.
package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster/ocicaps"
)

func main() {
	real := realRunc()
	if err := rewrite(os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "kind-runc: %v\n", err)
		os.Exit(1)
	}
	err := syscall.Exec(real, append([]string{real}, os.Args[1:]...), os.Environ())
	fmt.Fprintf(os.Stderr, "kind-runc: exec %s: %v\n", real, err)
	os.Exit(1)
}

func realRunc() string {
	if p := os.Getenv("KIND_RUNC_REAL"); p != "" {
		return p
	}
	for _, p := range []string{"/usr/local/sbin/runc", "/usr/sbin/runc", "/usr/bin/runc"} {
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p
		}
	}
	return "runc"
}

func rewrite(args []string) error {
	path, isProcess := ocicaps.Target(args)
	if path == "" {
		return nil
	}
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return err
	}
	bnd, err := ocicaps.BoundingSet(f)
	f.Close()
	if err != nil {
		return err
	}
	fix := ocicaps.Fix{Drop: ocicaps.Missing(bnd)}
	for _, c := range fix.Drop {
		if c == "CAP_SYS_RESOURCE" {
			// Without it, oom_score_adj may only go up from this process's own value.
			b, err := os.ReadFile("/proc/self/oom_score_adj")
			if err != nil {
				return err
			}
			floor, err := strconv.Atoi(strings.TrimSpace(string(b)))
			if err != nil {
				return err
			}
			fix.OOMFloor = &floor
		}
	}
	if len(fix.Drop) == 0 {
		return nil
	}
	doc, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	out, changed, err := ocicaps.RewriteSpec(doc, isProcess, fix)
	if err != nil || !changed {
		return err
	}
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	tmp := path + ".kind-runc"
	if err := os.WriteFile(tmp, out, st.Mode().Perm()); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
