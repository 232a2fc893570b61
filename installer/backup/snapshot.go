package backup

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
)

// snapshotSession is a psql session holding a REPEATABLE READ transaction open, with its
// snapshot exported. pg_dump --snapshot dumps exactly what that transaction sees, so the row
// counts taken in the same transaction describe the dump itself (not the database a moment
// later), and they are counted while pg_dump runs instead of after it.
type snapshotSession struct {
	stdin   *io.PipeWriter
	lines   chan string   // psql's stdout, line by line
	exited  chan struct{} // closed when psql has exited, with its error in exitErr
	exitErr error
	stderr  *tailBuffer
	cancel  context.CancelFunc
	id      string // the exported snapshot, for pg_dump --snapshot
}

// snapshotTimeout bounds the wait for the snapshot's name: a transport that holds psql's
// output back until it exits must cost the backup its row counts' snapshot, not hang it.
var snapshotTimeout = 30 * time.Second

// endMarker follows each answer psql is asked for, so a reader knows the answer is complete.
const endMarker = "--polyaxon-deploy-end--"

// openSnapshot starts the session and exports its snapshot. The caller must close it.
func openSnapshot(ctx context.Context, t Target) (*snapshotSession, error) {
	ctx, cancel := context.WithCancel(ctx)
	timer := time.AfterFunc(snapshotTimeout, cancel)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	s := &snapshotSession{stdin: inW, lines: make(chan string, 64), exited: make(chan struct{}), stderr: newTail(4096), cancel: cancel}
	// A cancelled session ends psql's input too: a local psql's Run waits for its input to end.
	stopInput := context.AfterFunc(ctx, func() { _ = inW.CloseWithError(ctx.Err()) })
	go func() {
		defer stopInput()
		err := t.Run(ctx, "psql", psqlArgs,
			Stdio{Stdin: inR, Stdout: outW, Stderr: s.stderr})
		_ = inR.CloseWithError(io.ErrClosedPipe)
		_ = outW.Close()
		s.exitErr = err
		close(s.exited)
	}()
	go func() {
		defer close(s.lines)
		sc := bufio.NewScanner(outR)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			s.lines <- sc.Text()
		}
		_, _ = io.Copy(io.Discard, outR)
	}()
	answer, err := s.ask("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY;\nSELECT pg_export_snapshot();\n")
	switch {
	case !timer.Stop() && err == nil:
		// The answer came only as the session ended: its snapshot is gone with it.
		err = fmt.Errorf("no answer within %s", snapshotTimeout)
	case err == nil && (len(answer) != 1 || answer[0] == ""):
		err = fmt.Errorf("unexpected answer %q", answer)
	}
	if err != nil {
		cancel()
		_ = s.close()
		return nil, fmt.Errorf("exporting a snapshot (%s): %w", t, err)
	}
	s.id = answer[0]
	return s, nil
}

// ask sends statements and returns the lines psql answers with.
func (s *snapshotSession) ask(statements string) ([]string, error) {
	if _, err := io.WriteString(s.stdin, statements+"\\echo "+endMarker+"\n"); err != nil {
		return nil, s.failure(err)
	}
	var answer []string
	for line := range s.lines {
		if line == endMarker {
			return answer, nil
		}
		answer = append(answer, line)
	}
	return nil, s.failure(io.ErrUnexpectedEOF)
}

// failure is the reason the session stopped answering: psql's exit and stderr when it exited.
func (s *snapshotSession) failure(err error) error {
	_ = s.stdin.Close()
	<-s.exited
	if s.exitErr != nil {
		return withStderr(s.exitErr, s.stderr)
	}
	return withStderr(err, s.stderr)
}

// countRows counts every table's rows as the snapshot sees them.
func (s *snapshotSession) countRows() (map[string]int64, error) {
	answer, err := s.ask(countRowsSQL + ";\n")
	if err != nil {
		return nil, fmt.Errorf("counting rows: %w", err)
	}
	return parseRowCounts(strings.Join(answer, "\n"))
}

// close ends the read-only transaction and the session.
func (s *snapshotSession) close() error {
	_, werr := io.WriteString(s.stdin, "COMMIT;\n\\q\n")
	_ = s.stdin.Close()
	for range s.lines {
	}
	<-s.exited
	s.cancel()
	if s.exitErr != nil {
		return withStderr(s.exitErr, s.stderr)
	}
	if werr != nil && !errors.Is(werr, io.ErrClosedPipe) {
		return werr
	}
	return nil
}
