package local

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// HostProcess is one program run on this machine in place of a simulated container (the shape
// of controller-runtime's envtest process): a path, arguments, an environment and a working
// directory; its output goes to a file in the CRI log format, which kwok serves as the
// container's log. Stop asks it
// to end with SIGTERM and kills it after the grace period, with every process it started.
type HostProcess struct {
	Path    string
	Args    []string
	Env     []string
	Dir     string
	LogPath string
	// PreStop is the container's preStop sleep: Terminate waits this long before SIGTERM.
	PreStop time.Duration

	mu       sync.Mutex
	cmd      *exec.Cmd
	done     chan struct{}
	exitCode int
}

// Start starts the process; it returns once the program runs (or could not be started).
func (p *HostProcess) Start() error {
	if err := os.MkdirAll(filepath.Dir(p.LogPath), 0o755); err != nil {
		return err
	}
	logf, err := os.OpenFile(p.LogPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(p.Path, p.Args...)
	cmd.Env, cmd.Dir = p.Env, p.Dir
	stdout, stderr := newCRILogWriters(logf)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	// A group of its own: Stop reaches the workers a program forks (uvicorn, celery).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start %s: %w", p.Path, err)
	}
	p.mu.Lock()
	p.cmd, p.done = cmd, make(chan struct{})
	p.mu.Unlock()
	go func() {
		err := cmd.Wait()
		_ = stdout.Flush()
		_ = stderr.Flush()
		logf.Close()
		code := 0
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			code = exit.ExitCode()
			if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				code = 128 + int(ws.Signal()) // as a container runtime reports a signal
			}
		} else if err != nil {
			code = 128
		}
		p.mu.Lock()
		p.exitCode = code
		p.mu.Unlock()
		close(p.done)
	}()
	return nil
}

// Done is closed when the process has exited.
func (p *HostProcess) Done() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.done
}

// ExitCode is the process's exit code (128+N when signal N ended it); valid once Done is closed.
func (p *HostProcess) ExitCode() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exitCode
}

// Pid is the process id, 0 before Start.
func (p *HostProcess) Pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// Terminate stops the process as the kubelet stops a container of a pod being deleted: the
// preStop sleep first, the process still serving (the EndpointSlices drop the pod meanwhile),
// then Stop with what is left of grace, at least the 2 s the kubelet gives after a hook.
func (p *HostProcess) Terminate(grace time.Duration) {
	slept := min(p.PreStop, grace)
	if slept > 0 {
		t := time.NewTimer(slept)
		defer t.Stop()
		select {
		case <-p.Done(): // nil before Start: the sleep runs out
		case <-t.C:
		}
	}
	p.Stop(max(grace-slept, 2*time.Second))
}

// Stop sends SIGTERM to the process group and SIGKILL after grace, then waits for the exit.
// Stopping a process that has exited is a no-op.
func (p *HostProcess) Stop(grace time.Duration) {
	pid, done := p.Pid(), p.Done()
	if pid == 0 {
		return
	}
	select {
	case <-done:
		return
	default:
	}
	_ = syscall.Kill(-pid, syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(grace):
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		<-done
	}
	// Children that ignored the group's SIGTERM (or outlived their parent) go too.
	_ = syscall.Kill(-pid, syscall.SIGKILL)
}

// killProcessesUnder kills every process whose working directory is under dir: the host
// programs of a cluster whose runner did not stop them (a test killed by its timeout).
// Linux only (/proc); elsewhere it finds nothing.
func killProcessesUnder(dir string) []int {
	dir = filepath.Clean(dir) + string(filepath.Separator)
	entries, _ := os.ReadDir("/proc")
	var killed []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cwd, err := os.Readlink(filepath.Join("/proc", e.Name(), "cwd"))
		if err != nil || !strings.HasPrefix(cwd+string(filepath.Separator), dir) {
			continue
		}
		if syscall.Kill(pid, syscall.SIGKILL) == nil {
			killed = append(killed, pid)
		}
	}
	return killed
}

// HandlesTerm says whether the process has a handler of its own for SIGTERM (its SigCgt in
// /proc/<pid>/status); false once it ended or when that cannot be read.
func (p *HostProcess) HandlesTerm() bool {
	p.mu.Lock()
	cmd := p.cmd
	p.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return false
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", cmd.Process.Pid))
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(status), "\n") {
		if mask, ok := strings.CutPrefix(line, "SigCgt:"); ok {
			caught, err := strconv.ParseUint(strings.TrimSpace(mask), 16, 64)
			return err == nil && caught&(1<<(uint(syscall.SIGTERM)-1)) != 0
		}
	}
	return false
}
