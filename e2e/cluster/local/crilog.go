package local

import (
	"bytes"
	"io"
	"strings"
	"sync"
	"time"
)

// criLogWriter writes a process's output in the CRI log format, the only format kwok serves
// as `kubectl logs` (besides Docker's JSON): one line per record,
// `<RFC3339Nano time> <stream> <F|P> <text>`, P marking a line still to be continued.
type criLogWriter struct {
	mu     *sync.Mutex // shared by a process's stdout and stderr: records never interleave
	w      io.Writer
	stream string
	buf    []byte
	now    func() time.Time
}

func newCRILogWriters(w io.Writer) (stdout, stderr *criLogWriter) {
	mu := &sync.Mutex{}
	return &criLogWriter{mu: mu, w: w, stream: "stdout", now: time.Now},
		&criLogWriter{mu: mu, w: w, stream: "stderr", now: time.Now}
}

// maxCRILine is where a long line is split into partial records (the kubelet's is 16 KiB).
const maxCRILine = 16 * 1024

func (c *criLogWriter) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.buf = append(c.buf, p...)
	for {
		i := bytes.IndexByte(c.buf, '\n')
		if i < 0 {
			if len(c.buf) >= maxCRILine {
				if err := c.record("P", c.buf[:maxCRILine]); err != nil {
					return 0, err
				}
				c.buf = c.buf[maxCRILine:]
				continue
			}
			return len(p), nil
		}
		if err := c.record("F", c.buf[:i]); err != nil {
			return 0, err
		}
		c.buf = c.buf[i+1:]
	}
}

// Flush writes what is left of an unterminated last line.
func (c *criLogWriter) Flush() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.buf) == 0 {
		return nil
	}
	err := c.record("F", c.buf)
	c.buf = nil
	return err
}

func (c *criLogWriter) record(tag string, line []byte) error {
	rec := make([]byte, 0, len(line)+48)
	rec = c.now().UTC().AppendFormat(rec, time.RFC3339Nano)
	rec = append(rec, ' ')
	rec = append(rec, c.stream...)
	rec = append(rec, ' ')
	rec = append(rec, tag...)
	rec = append(rec, ' ')
	rec = append(rec, line...)
	rec = append(rec, '\n')
	_, err := c.w.Write(rec)
	return err
}

// criText is the text of CRI log records, without their time, stream and tag: what
// `kubectl logs` prints (a container's termination message taken from its log).
func criText(records string) string {
	var b strings.Builder
	for _, rec := range strings.Split(strings.TrimRight(records, "\n"), "\n") {
		parts := strings.SplitN(rec, " ", 4)
		if len(parts) < 4 {
			continue // a record cut by the tail, or none at all
		}
		b.WriteString(parts[3])
		if parts[2] != "P" {
			b.WriteByte('\n')
		}
	}
	return b.String()
}
