package backup

import (
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// writebackEvery is how much a dump file takes in before its pages are handed to the kernel
// for writing.
const writebackEvery = 8 << 20

// earlyWriteback writes to a file and has the kernel start writing each few MiB to disk as
// they come (sync_file_range, without waiting), so that the backup's final fsync finds little
// left to write: the disk works while the CPU dumps.
type earlyWriteback struct {
	f       *os.File
	fd      int
	written int64
	started int64 // bytes handed to writeback so far
}

// withEarlyWriteback returns f as an earlyWriteback, or f itself when its descriptor is not
// at hand.
func withEarlyWriteback(f *os.File) io.Writer {
	rc, err := f.SyscallConn()
	if err != nil {
		return f
	}
	w := &earlyWriteback{f: f, fd: -1}
	_ = rc.Control(func(fd uintptr) { w.fd = int(fd) })
	if w.fd < 0 {
		return f
	}
	return w
}

func (w *earlyWriteback) Write(p []byte) (int, error) {
	n, err := w.f.Write(p)
	w.written += int64(n)
	if w.written-w.started >= writebackEvery {
		// Best effort: the fsync at the end is what makes the file durable.
		_ = unix.SyncFileRange(w.fd, w.started, w.written-w.started, unix.SYNC_FILE_RANGE_WRITE)
		w.started = w.written
	}
	return n, err
}
