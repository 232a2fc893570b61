//go:build !linux

package backup

import "os"

func widenPipe(*os.File) int { return 0 }
