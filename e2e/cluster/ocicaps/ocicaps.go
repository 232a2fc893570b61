// Package ocicaps removes from an OCI runtime spec the capabilities that the runtime's own
// process cannot grant (those missing from its bounding set). On a machine whose bounding set
// lacks one capability (CAP_SYS_RESOURCE here), runc refuses every privileged container with
// "unable to apply caps: operation not permitted"; kind creates its nodes privileged, and the
// kubelet creates privileged pods inside them. A runtime wrapper rewrites the spec with this
// package and then calls runc.
package ocicaps

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// names lists the capabilities by bit number (linux/capability.h).
var names = []string{
	"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_DAC_READ_SEARCH", "CAP_FOWNER", "CAP_FSETID",
	"CAP_KILL", "CAP_SETGID", "CAP_SETUID", "CAP_SETPCAP", "CAP_LINUX_IMMUTABLE",
	"CAP_NET_BIND_SERVICE", "CAP_NET_BROADCAST", "CAP_NET_ADMIN", "CAP_NET_RAW", "CAP_IPC_LOCK",
	"CAP_IPC_OWNER", "CAP_SYS_MODULE", "CAP_SYS_RAWIO", "CAP_SYS_CHROOT", "CAP_SYS_PTRACE",
	"CAP_SYS_PACCT", "CAP_SYS_ADMIN", "CAP_SYS_BOOT", "CAP_SYS_NICE", "CAP_SYS_RESOURCE",
	"CAP_SYS_TIME", "CAP_SYS_TTY_CONFIG", "CAP_MKNOD", "CAP_LEASE", "CAP_AUDIT_WRITE",
	"CAP_AUDIT_CONTROL", "CAP_SETFCAP", "CAP_MAC_OVERRIDE", "CAP_MAC_ADMIN", "CAP_SYSLOG",
	"CAP_WAKE_ALARM", "CAP_BLOCK_SUSPEND", "CAP_AUDIT_READ", "CAP_PERFMON", "CAP_BPF",
	"CAP_CHECKPOINT_RESTORE",
}

// Missing returns the names of the known capabilities absent from a bounding-set mask.
func Missing(bounding uint64) []string {
	var out []string
	for bit, n := range names {
		if bounding&(1<<uint(bit)) == 0 {
			out = append(out, n)
		}
	}
	return out
}

// BoundingSet reads the CapBnd mask from a /proc/<pid>/status document.
func BoundingSet(status io.Reader) (uint64, error) {
	s := bufio.NewScanner(status)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), "CapBnd:"); ok {
			return strconv.ParseUint(strings.TrimSpace(v), 16, 64)
		}
	}
	if err := s.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("no CapBnd line")
}

// capSets are the fields of an OCI process's "capabilities" object.
var capSets = []string{"bounding", "effective", "inheritable", "permitted", "ambient"}

// Drop removes the named capabilities from every capability set of an OCI process object
// (runtime-spec "process", or the document runc exec reads with --process). Other fields are
// kept as they were. It reports whether anything was removed.
func Drop(process map[string]any, drop []string) bool {
	caps, ok := process["capabilities"].(map[string]any)
	if !ok || len(drop) == 0 {
		return false
	}
	gone := map[string]bool{}
	for _, d := range drop {
		gone[d] = true
	}
	changed := false
	for _, set := range capSets {
		list, ok := caps[set].([]any)
		if !ok {
			continue
		}
		kept := list[:0:0]
		for _, c := range list {
			if s, _ := c.(string); gone[s] {
				changed = true
				continue
			}
			kept = append(kept, c)
		}
		caps[set] = kept
	}
	return changed
}

// RaiseOOMScoreAdj sets a process's "oomScoreAdj" to floor when it asks for less. Without
// CAP_SYS_RESOURCE a process may not lower its oom_score_adj below its current value, and runc
// then fails before the container starts ("can't get final child's PID from pipe: EOF"): the
// kubelet asks -998 for pod sandboxes and -997 for critical pods.
func RaiseOOMScoreAdj(process map[string]any, floor int) bool {
	v, ok := process["oomScoreAdj"].(float64)
	if !ok || int(v) >= floor {
		return false
	}
	process["oomScoreAdj"] = floor
	return true
}

// Fix says what RewriteSpec changes: the capabilities to drop and, when OOMFloor is set, the
// lowest oomScoreAdj allowed.
type Fix struct {
	Drop     []string
	OOMFloor *int
}

// RewriteSpec applies Drop (and RaiseOOMScoreAdj) to a config.json document's "process"
// (isProcess false) or to a process document (isProcess true), returning the new bytes and
// whether it changed.
func RewriteSpec(doc []byte, isProcess bool, fix Fix) ([]byte, bool, error) {
	var m map[string]any
	if err := json.Unmarshal(doc, &m); err != nil {
		return nil, false, err
	}
	process := m
	if !isProcess {
		p, ok := m["process"].(map[string]any)
		if !ok {
			return doc, false, nil
		}
		process = p
	}
	changed := Drop(process, fix.Drop)
	if fix.OOMFloor != nil && RaiseOOMScoreAdj(process, *fix.OOMFloor) {
		changed = true
	}
	if !changed {
		return doc, false, nil
	}
	out, err := json.Marshal(m)
	return out, true, err
}

// Target finds, in a runc command line, the file to rewrite: <bundle>/config.json for
// "create" and "run" (the bundle from --bundle/-b, else the working directory ""), the
// --process/-p file for "exec". It returns "" when the command needs no rewrite.
func Target(args []string) (path string, isProcess bool) {
	cmd := ""
	bundle, process := ".", ""
	for i := 0; i < len(args); i++ {
		a := args[i]
		val := func(long, short string) (string, bool) {
			for _, f := range []string{long, short} {
				if f == "" {
					continue
				}
				if a == f && i+1 < len(args) {
					i++
					return args[i], true
				}
				if v, ok := strings.CutPrefix(a, f+"="); ok {
					return v, true
				}
			}
			return "", false
		}
		if v, ok := val("--bundle", "-b"); ok && cmd != "" {
			bundle = v
			continue
		}
		if v, ok := val("--process", "-p"); ok && cmd == "exec" {
			process = v
			continue
		}
		// Global flags that take a value come before the command.
		if cmd == "" {
			if _, ok := val("--root", ""); ok {
				continue
			}
			if _, ok := val("--log", ""); ok {
				continue
			}
			if _, ok := val("--log-format", ""); ok {
				continue
			}
			if _, ok := val("--criu", ""); ok {
				continue
			}
			if _, ok := val("--rootless", ""); ok {
				continue
			}
			if !strings.HasPrefix(a, "-") {
				cmd = a
			}
		}
	}
	switch cmd {
	case "create", "run":
		return strings.TrimSuffix(bundle, "/") + "/config.json", false
	case "exec":
		if process != "" {
			return process, true
		}
	}
	return "", false
}
