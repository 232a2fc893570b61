package backup

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// Entry is one backup directory found by List.
type Entry struct {
	Dir      string
	Manifest *Manifest // nil when Problem is set
	// Problem says why the directory is not a usable backup (no or bad
	// manifest: an unfinished backup).
	Problem string
	// Time is the manifest's start time, else the directory's mtime.
	Time time.Time
}

// List returns the backups directly under dir, newest first. Directories
// without a readable manifest are listed with a Problem, so unfinished
// backups are visible. A missing dir gives an empty list.
func List(dir string) ([]Entry, error) {
	items, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing backups in %s: %w", dir, err)
	}
	var out []Entry
	for _, it := range items {
		if !it.IsDir() || strings.HasPrefix(it.Name(), ".") {
			continue
		}
		p := filepath.Join(dir, it.Name())
		e := Entry{Dir: p}
		m, err := ReadManifest(p)
		if err != nil {
			// Only directories that look like backups are worth reporting.
			if _, serr := os.Stat(filepath.Join(p, SecretsFile)); serr != nil && !hasDump(p) {
				continue
			}
			e.Problem = err.Error()
			if info, ierr := it.Info(); ierr == nil {
				e.Time = info.ModTime().UTC()
			}
		} else {
			e.Manifest, e.Time = m, m.StartedAt
		}
		out = append(out, e)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if !out[i].Time.Equal(out[j].Time) {
			return out[i].Time.After(out[j].Time)
		}
		return out[i].Dir > out[j].Dir
	})
	return out, nil
}

func hasDump(dir string) bool {
	m, _ := filepath.Glob(filepath.Join(dir, DumpBaseName+"*"))
	return len(m) > 0
}
