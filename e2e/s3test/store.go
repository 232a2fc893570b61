// Package s3test starts a real, throw-away S3 store for tests: Versity S3 Gateway (versitygw,
// built from the Go module proxy by e2e/scripts/build-s3store.sh) with its POSIX backend on a
// temporary directory, listening on 127.0.0.1, with a random root account, its internal IAM for
// further accounts, and its admin API on a second port.
//
// Objects are plain files: the object KEY of bucket B is the file DataDir/B/KEY, so a test can
// read or damage one directly. Metadata lives in a sidecar directory, not in xattrs.
//
// A missing binary is an error that says `make s3store`: tests never skip because the store is
// absent. Like pgtest, New skips under -short (make unit).
package s3test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Region is the region the store answers for.
const Region = "us-east-1"

// Store is a running versitygw owned by the caller; Close stops it and removes its files.
type Store struct {
	Endpoint      string // S3 API, http://127.0.0.1:PORT
	AdminEndpoint string // versitygw's admin API, http://127.0.0.1:PORT
	Region        string // us-east-1
	RootAccessKey string // the root account: an admin, not stored in the IAM
	RootSecretKey string
	Dir           string // temporary root, removed by Close
	DataDir       string // the POSIX backend's root: objects are files under DataDir/<bucket>/<key>
	IAMDir        string // the internal IAM's users.json
	MetaDir       string // the sidecar metadata (ACLs, owners, ETags)
	LogFile       string // versitygw's stdout and stderr (one line per request)

	cmd    *exec.Cmd
	done   chan struct{} // closed when the process has exited
	closed bool
}

// SkipIfShort skips a test that needs an S3 store under `go test -short` (make unit).
func SkipIfShort(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("needs an S3 store (versitygw): skipped with -short")
	}
}

// New starts a store for a test and stops it (and removes its files) on t.Cleanup. It fails
// the test when the store cannot start, and skips it under -short.
func New(t testing.TB) *Store {
	t.Helper()
	SkipIfShort(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := Start(ctx)
	if err != nil {
		t.Fatalf("s3test: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("s3test: %v", err)
		}
	})
	return s
}

// startAttempts bounds the retries when another program takes a chosen port between its
// choice and versitygw's bind.
const startAttempts = 3

// Start starts a store; it returns once the S3 API answers its health check and the admin API
// answers. The caller must Close it.
func Start(ctx context.Context) (*Store, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	root, err := os.MkdirTemp("", "s3test-")
	if err != nil {
		return nil, fmt.Errorf("creating temporary directory: %w", err)
	}
	s := &Store{
		Region:        Region,
		RootAccessKey: "ROOT" + strings.ToUpper(randomHex(8)), // 20 characters, as AWS's
		RootSecretKey: randomHex(20),                          // 40 characters
		Dir:           root,
		DataDir:       filepath.Join(root, "data"),
		IAMDir:        filepath.Join(root, "iam"),
		MetaDir:       filepath.Join(root, "meta"),
		LogFile:       filepath.Join(root, "versitygw.log"),
	}
	for _, d := range []string{s.DataDir, s.IAMDir, s.MetaDir} {
		if err := os.Mkdir(d, 0o700); err != nil {
			_ = os.RemoveAll(root)
			return nil, err
		}
	}
	for attempt := 1; ; attempt++ {
		err = s.start(ctx, bin)
		if err == nil {
			return s, nil
		}
		_ = s.stop()
		if !errors.Is(err, errPortTaken) || attempt == startAttempts {
			_ = os.RemoveAll(root)
			return nil, err
		}
	}
}

var errPortTaken = errors.New("a port was taken before versitygw bound it")

// start runs versitygw on two fresh loopback ports and waits until both APIs answer.
func (s *Store) start(ctx context.Context, bin string) error {
	ports, err := pickPorts(2)
	if err != nil {
		return err
	}
	addr, adminAddr := "127.0.0.1:"+strconv.Itoa(ports[0]), "127.0.0.1:"+strconv.Itoa(ports[1])
	s.Endpoint, s.AdminEndpoint = "http://"+addr, "http://"+adminAddr

	logf, err := os.OpenFile(s.LogFile, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close() // the child holds its own descriptor
	// Global options before the backend; the backend's options and its root directory after.
	cmd := exec.Command(bin,
		"--port", addr, "--admin-port", adminAddr, "--region", s.Region,
		"--health", "/health", "--iam-dir", s.IAMDir,
		"posix", "--sidecar", s.MetaDir, s.DataDir)
	// The root account's keys go through the environment, never the command line; the VGW_*
	// variables of the caller's environment would change the gateway, so they are left out.
	cmd.Env = append(withoutPrefix(os.Environ(), "VGW_", "ROOT_ACCESS_KEY", "ROOT_SECRET"),
		"ROOT_ACCESS_KEY_ID="+s.RootAccessKey, "ROOT_SECRET_ACCESS_KEY="+s.RootSecretKey)
	cmd.Dir, cmd.Stdout, cmd.Stderr = s.Dir, logf, logf
	// A group of its own, so that Close reaches anything it starts; killed with the test.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", bin, err)
	}
	s.cmd, s.done = cmd, make(chan struct{})
	go func() { _ = cmd.Wait(); close(s.done) }()

	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	// A probe that reached another program on a taken port may never be answered: the exit
	// of versitygw ends it.
	go func() {
		select {
		case <-s.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	client := &http.Client{Timeout: 5 * time.Second}
	for _, probe := range []struct {
		url string
		ok  func(status int) bool
	}{
		{s.Endpoint + "/health", func(status int) bool { return status == http.StatusOK }},
		// The admin API has no health path: any answer means it serves.
		{s.AdminEndpoint + "/", func(int) bool { return true }},
	} {
		if err := s.waitFor(ctx, client, probe.url, probe.ok); err != nil {
			return err
		}
	}
	return nil
}

func (s *Store) waitFor(ctx context.Context, client *http.Client, url string, ok func(int) bool) error {
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		status := 0
		if resp, err := client.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			status = resp.StatusCode
			if ok(status) {
				return nil
			}
		}
		select {
		case <-s.done:
			return s.exited(url)
		case <-ctx.Done():
			select {
			case <-s.done: // the exit cancelled ctx
				return s.exited(url)
			default:
			}
			return fmt.Errorf("versitygw: GET %s did not answer (last status %d): %w; its log %s:\n%s", url, status, ctx.Err(), s.LogFile, s.logTail())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// exited is the error of a versitygw that ended while it was awaited: errPortTaken when it
// could not bind a port.
func (s *Store) exited(url string) error {
	log := s.logTail()
	if strings.Contains(log, "address already in use") {
		return fmt.Errorf("%w: %s", errPortTaken, log)
	}
	return fmt.Errorf("versitygw exited before GET %s answered (%s); its log %s:\n%s", url, s.cmd.ProcessState, s.LogFile, log)
}

// logTail is the end of versitygw's log, for errors.
func (s *Store) logTail() string {
	b, err := os.ReadFile(s.LogFile)
	if err != nil {
		return err.Error()
	}
	const max = 4000
	if len(b) > max {
		b = append([]byte("..."), b[len(b)-max:]...)
	}
	return strings.TrimSpace(string(b))
}

// stopGrace is how long versitygw has to end after SIGTERM before SIGKILL.
const stopGrace = 10 * time.Second

// stop ends the process group: SIGTERM, then SIGKILL after stopGrace.
func (s *Store) stop() error {
	if s.cmd == nil {
		return nil
	}
	pid, done := s.cmd.Process.Pid, s.done
	s.cmd = nil
	select {
	case <-done:
		return nil
	default:
	}
	_ = syscall.Kill(-pid, syscall.SIGTERM)
	var err error
	select {
	case <-done:
	case <-time.After(stopGrace):
		err = fmt.Errorf("versitygw (pid %d) did not end %s after SIGTERM: killed", pid, stopGrace)
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		<-done
	}
	_ = syscall.Kill(-pid, syscall.SIGKILL) // anything left in its group
	return err
}

// Close stops the store and removes its files.
func (s *Store) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	return errors.Join(s.stop(), os.RemoveAll(s.Dir))
}

// pickPorts is freePorts; a test replaces it to hand out a taken port.
var pickPorts = freePorts

// freePorts returns n distinct loopback ports that were free a moment ago: all are held open
// together, so none is returned twice.
func freePorts(n int) ([]int, error) {
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("finding a free port: %w", err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func withoutPrefix(env []string, prefixes ...string) []string {
	var out []string
next:
	for _, kv := range env {
		for _, p := range prefixes {
			if strings.HasPrefix(kv, p) {
				continue next
			}
		}
		out = append(out, kv)
	}
	return out
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
