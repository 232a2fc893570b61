package main

// The debug log: kept in memory and written to a temp file only if the command fails (finish
// prints its path), or written to --debug-log FILE as it goes. Every library's log reaches it.

import (
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
)

// debugf records a debug line. With --debug-log FILE lines go straight to FILE; otherwise
// they are kept in memory and written to a temp file only if the command fails (finish prints
// the path), so successful runs leave nothing behind.
func debugf(c *cli.Context, format string, a ...any) {
	e := envOf(c)
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.logStarted {
		e.logStarted = true
		if path := c.String(flagDebugLog); path != "" {
			e.logPath = path
			e.logFile, e.logErr = os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		}
		e.writeLog(fmt.Sprintf("%s polyaxon-deploy %s: %s\n", time.Now().Format(time.RFC3339), version, strings.Join(redactArgs(os.Args), " ")))
	}
	e.writeLog(fmt.Sprintf("%s "+format+"\n", append([]any{time.Now().Format("15:04:05.000")}, a...)...))
}

// maxLogBuffer bounds the in-memory log (Helm can be chatty); the newest lines are kept.
const maxLogBuffer = 4 << 20

func (e *env) writeLog(line string) {
	line = e.scrub.String(line)
	if e.logFile != nil {
		_, _ = e.logFile.WriteString(line)
		return
	}
	e.logBuf.WriteString(line)
	if e.logBuf.Len() > maxLogBuffer {
		b := e.logBuf.Bytes()
		rest := append([]byte("... (earlier lines dropped)\n"), b[len(b)-maxLogBuffer/2:]...)
		e.logBuf.Reset()
		e.logBuf.Write(rest)
	}
}

// helmLog adapts debugf to the Helm SDK's log function.
func helmLog(c *cli.Context) func(string, ...any) {
	return func(format string, a ...any) { debugf(c, "helm: "+format, a...) }
}

// flushDebugLog makes sure the log is on disk and returns its path ("" if nothing was logged
// or it could not be written).
func (e *env) flushDebugLog() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.logFile != nil {
		return e.logPath
	}
	if e.logErr != nil || e.logBuf.Len() == 0 {
		return ""
	}
	f, err := os.CreateTemp("", "polyaxon-deploy-*.log")
	if err != nil {
		return ""
	}
	defer f.Close()
	if _, err := f.Write(e.logBuf.Bytes()); err != nil {
		return ""
	}
	e.logPath = f.Name()
	return e.logPath
}

func (e *env) close() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.logFile != nil {
		_ = e.logFile.Close()
	}
}

// debugWriter sends what libraries log (the standard logger, slog, the chart source) to the
// command's debug log, a line at a time, after prefix.
type debugWriter struct {
	c      *cli.Context
	prefix string
}

func (w debugWriter) Write(p []byte) (int, error) {
	debugf(w.c, "%s: %s", w.prefix, strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// debugLogger is the debug log for libraries that log with slog (installer/backup).
func debugLogger(c *cli.Context) *slog.Logger {
	return slog.New(slog.NewTextHandler(debugWriter{c, "backup"}, nil))
}
