package pgtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// State is what another process needs to use a server this one left running (Detach) and to
// stop it later (Attach, then Close). It holds the superuser password: keep it private.
type State struct {
	BinDir    string `json:"binDir"`
	Dir       string `json:"dir"`
	DataDir   string `json:"dataDir"`
	SocketDir string `json:"socketDir"`
	LogFile   string `json:"logFile"`
	Host      string `json:"host"`
	Port      int    `json:"port"`
	User      string `json:"user"`
	Database  string `json:"database"`
	Password  string `json:"password"`
}

// Detach hands the server over to a later process: this Server can no longer Close it, and
// the server keeps running after this process exits (pg_ctl starts it in its own session).
// Keep the returned State to Attach to it.
func (s *Server) Detach() State {
	s.closed = true
	return State{BinDir: s.BinDir, Dir: s.Dir, DataDir: s.DataDir, SocketDir: s.SocketDir, LogFile: s.LogFile,
		Host: s.Host, Port: s.Port, User: s.User, Database: s.Database, Password: s.password}
}

// Attach takes over a server left by Detach, starting it again when it is not running (after a
// reboot, say). Close stops it and removes its files.
func Attach(ctx context.Context, st State) (*Server, error) {
	if st.DataDir == "" || st.Dir == "" {
		return nil, errors.New("pgtest: attach: the state names no server directory")
	}
	if _, err := os.Stat(filepath.Join(st.DataDir, "PG_VERSION")); err != nil {
		return nil, fmt.Errorf("pgtest: attach: no PostgreSQL data directory at %s: %w", st.DataDir, err)
	}
	s := &Server{BinDir: st.BinDir, Dir: st.Dir, DataDir: st.DataDir, SocketDir: st.SocketDir, LogFile: st.LogFile,
		Host: st.Host, Port: st.Port, User: st.User, Database: st.Database, password: st.Password}
	if os.Geteuid() == 0 {
		cred, err := unprivilegedCredential()
		if err != nil {
			return nil, err
		}
		s.cred = cred
	}
	if _, err := s.runAsServer(ctx, "pg_ctl", "status", "-D", s.DataDir); err == nil {
		s.running = true
		return s, nil
	}
	if err := s.Restart(ctx); err != nil {
		return nil, fmt.Errorf("pgtest: attach: %w", err)
	}
	return s, nil
}
