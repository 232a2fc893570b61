package backup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// Retention says which backups Prune keeps. A backup is kept when either rule keeps it, and
// the newest finished backup of each release is always kept: no rule empties a release's
// history.
type Retention struct {
	// KeepLast keeps the newest N finished backups of each release (0: no such rule).
	KeepLast int
	// KeepWithin keeps every finished backup started less than this long ago (0: no such
	// rule).
	KeepWithin time.Duration
}

// Validate refuses a rule that would keep nothing but the newest backup by accident.
func (r Retention) Validate() error {
	switch {
	case r.KeepLast < 0:
		return fmt.Errorf("--keep-last %d: give 1 or more", r.KeepLast)
	case r.KeepWithin < 0:
		return fmt.Errorf("--keep-within %s: give a positive duration, e.g. 720h", r.KeepWithin)
	case r.KeepLast == 0 && r.KeepWithin == 0:
		return errors.New("a retention rule is needed: --keep-last N and/or --keep-within DURATION (e.g. --keep-last 7 --keep-within 720h)")
	}
	return nil
}

// Pruned is one backup Prune looked at, and what it did with it.
type Pruned struct {
	Entry
	// Removed is true when the backup was removed (or, in a dry run, would be).
	Removed bool
	// Why says which rule kept or removed it.
	Why string
}

// Prune applies r to the backups directly under dir (List's), removing the finished backups no
// rule keeps (none when dryRun). Directories that are not finished backups (no readable
// manifest: an unfinished or foreign directory) are never removed, nor is anything List does
// not list (files, symbolic links, hidden directories). Backups are grouped by the release
// and namespace their manifests name.
func Prune(dir string, r Retention, now time.Time, dryRun bool) ([]Pruned, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	entries, err := List(dir)
	if err != nil {
		return nil, err
	}
	out := Select(entries, r, now, func(e Entry) string { return notWhole(e, now) })
	if dryRun {
		return out, nil
	}
	for _, p := range out {
		if !p.Removed {
			continue
		}
		if err := os.RemoveAll(p.Dir); err != nil {
			return out, fmt.Errorf("removing backup %s: %w", p.Dir, err)
		}
	}
	return out, nil
}

// Select applies r to entries (newest first, as List gives them) and says which to remove;
// wherever the backups are. notWhole says why a finished backup does not count among its
// release's ("" when it does): its files are missing or of another size, or it is dated after
// now.
func Select(entries []Entry, r Retention, now time.Time, notWhole func(Entry) string) []Pruned {
	seen := map[string]int{} // finished backups seen per release, newest first
	var out []Pruned
	for _, e := range entries {
		p := Pruned{Entry: e}
		if e.Manifest == nil {
			p.Why = "not a finished backup: left alone"
			out = append(out, p)
			continue
		}
		// Only a whole backup counts among a release's newest: a damaged one, or one dated in
		// the future (a forged manifest), would otherwise push the real ones out.
		if why := notWhole(e); why != "" {
			p.Why = why + ": left alone, not counted"
			out = append(out, p)
			continue
		}
		release := e.Manifest.Namespace + "/" + e.Manifest.Release
		seen[release]++
		n := seen[release]
		switch {
		case n == 1:
			p.Why = "the release's newest"
		case r.KeepLast > 0 && n <= r.KeepLast:
			p.Why = fmt.Sprintf("among the release's newest %d", r.KeepLast)
		case r.KeepWithin > 0 && now.Sub(e.Time) < r.KeepWithin:
			p.Why = fmt.Sprintf("younger than %s", r.KeepWithin)
		default:
			p.Removed, p.Why = true, "no rule keeps it"
		}
		out = append(out, p)
	}
	return out
}

// StartedInTheFuture says why a backup dated after now does not count ("" when it is not).
func StartedInTheFuture(m *Manifest, now time.Time) string {
	if m.StartedAt.After(now) {
		return "started in the future (" + m.StartedAt.Format(time.RFC3339) + ")"
	}
	return ""
}

// notWhole says why a finished backup does not count as a release's backup ("" when it does):
// its files are not all there at the sizes its manifest recorded, or it started after now.
func notWhole(e Entry, now time.Time) string {
	m := e.Manifest
	if why := StartedInTheFuture(m, now); why != "" {
		return why
	}
	if m.Encryption != nil {
		for _, f := range m.Encryption.Files {
			if st, err := os.Stat(filepath.Join(e.Dir, f.File)); err != nil || st.Size() != f.Size {
				return "sealed file " + f.File + " missing or not of its recorded size"
			}
		}
		return ""
	}
	if _, err := checkDumpFiles(e.Dir, m); err != nil {
		return "dump files missing or not of their recorded size"
	}
	return ""
}
