package action

import (
	"context"
	"fmt"
	"strings"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/backup"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/bucket"
)

// ListBackups lists the backups in Dir (a directory or s3://BUCKET/PREFIX), newest first, each dump checked against its
// manifest's size and sha256 unless NoVerify.
type ListBackups struct {
	Env
	Dir      string
	NoVerify bool
}

// ListedBackup is one backup in a listing.
type ListedBackup struct {
	Path string `json:"path"`
	// Status is ok (checksum verified), not-verified (NoVerify), damaged (size or sha256
	// differ from the manifest) or incomplete (no manifest or no dump).
	Status string `json:"status"`
	// Verified is true when the dump's size and sha256 were checked against the manifest.
	Verified bool             `json:"verified"`
	Problem  string           `json:"problem,omitempty"`
	Manifest *backup.Manifest `json:"manifest,omitempty"`
}

// Statuses of a listed backup.
const (
	BackupOK          = "ok"
	BackupNotVerified = "not-verified"
	BackupDamaged     = "damaged"
	BackupIncomplete  = "incomplete"
)

// Run lists. The warnings name each damaged or incomplete backup.
func (a *ListBackups) Run(ctx context.Context) (listed []ListedBackup, warnings []string, err error) {
	var entries []backup.Entry
	checksum := func(ctx context.Context, i int) error { return backup.Checksum(ctx, entries[i].Dir) }
	if bucket.IsLocation(a.Dir) {
		entries, checksum, err = listBucket(ctx, a.Dir)
	} else {
		entries, err = backup.List(a.Dir)
	}
	if err != nil {
		return nil, nil, err
	}
	listed = []ListedBackup{}
	for i, e := range entries {
		le := ListedBackup{Path: e.Dir, Problem: e.Problem, Manifest: e.Manifest, Status: BackupNotVerified}
		switch {
		case e.Manifest == nil:
			le.Status = BackupIncomplete
		case !a.NoVerify:
			if err := checksum(ctx, i); err != nil {
				if ctx.Err() != nil {
					return nil, nil, ctx.Err()
				}
				le.Status, le.Problem = BackupDamaged, err.Error()
			} else {
				le.Status, le.Verified = BackupOK, true
			}
		}
		if le.Status == BackupDamaged || le.Status == BackupIncomplete {
			warnings = append(warnings, fmt.Sprintf("%s: %s", le.Path, FirstLine(le.Problem)))
		}
		listed = append(listed, le)
	}
	if len(entries) > 0 && a.NoVerify {
		a.progress().Warn("checksums not verified (--no-verify): a damaged dump would not show here; `polyaxon-deploy backup verify PATH` checks one")
	}
	return listed, warnings, nil
}

// FirstLine is the first line of s.
func FirstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
