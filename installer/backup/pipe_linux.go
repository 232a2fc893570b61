package backup

import (
	"os"

	"golang.org/x/sys/unix"
)

// widenPipe raises a pipe's buffer from 64 KiB to 1 MiB (best effort): fewer wake-ups of
// pg_restore and of us per MiB streamed. It returns the pipe's capacity in bytes, 0 when
// unknown.
func widenPipe(f *os.File) int {
	rc, err := f.SyscallConn()
	if err != nil {
		return 0
	}
	size := 0
	_ = rc.Control(func(fd uintptr) {
		// Refused above the user's pipe quota or fs.pipe-max-size: the pipe keeps its size.
		_, _ = unix.FcntlInt(fd, unix.F_SETPIPE_SZ, 1<<20)
		size, _ = unix.FcntlInt(fd, unix.F_GETPIPE_SZ, 0)
	})
	return size
}
