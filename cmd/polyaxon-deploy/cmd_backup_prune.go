package main

import (
	"context"
	"fmt"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/action"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/backup"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/output"
)

const (
	flagKeepLast   = "keep-last"
	flagKeepWithin = "keep-within"
)

func backupPruneCommand() *cli.Command {
	return &cli.Command{
		Name:      "prune",
		Usage:     "remove the backups a retention rule does not keep (each release's newest is always kept)",
		UsageText: "polyaxon-deploy backup prune [--dir DIR] --keep-last N [--keep-within 720h] [--dry-run]",
		Flags: joinFlags(outputFlags(), []cli.Flag{backupDirFlag(),
			&cli.IntFlag{Name: flagKeepLast, Usage: "keep the newest N finished backups of each release"},
			&cli.DurationFlag{Name: flagKeepWithin, Usage: "keep every finished backup younger than this (e.g. 720h)"},
			&cli.BoolFlag{Name: flagDryRun, Usage: "say what would be removed, remove nothing"},
		}),
		Action: runBackupPrune,
	}
}

// BackupPruneData is the payload of `backup prune`.
type BackupPruneData struct {
	Dir     string        `json:"dir"`
	DryRun  bool          `json:"dryRun,omitempty"`
	Backups []PrunedEntry `json:"backups"`
}

// PrunedEntry is one backup prune looked at.
type PrunedEntry struct {
	Path    string    `json:"path"`
	Started time.Time `json:"started,omitzero"`
	Release string    `json:"release,omitempty"`
	Removed bool      `json:"removed"`
	Why     string    `json:"why"`
}

// Table implements output.Tabler.
func (d BackupPruneData) Table() ([]string, [][]string) {
	rows := [][]string{}
	for _, e := range d.Backups {
		action := "kept"
		switch {
		case e.Removed && d.DryRun:
			action = "would remove"
		case e.Removed:
			action = "removed"
		}
		started := "-"
		if !e.Started.IsZero() {
			started = e.Started.Format(time.RFC3339)
		}
		rows = append(rows, []string{e.Path, started, e.Release, action, e.Why})
	}
	return []string{"PATH", "STARTED", "RELEASE", "ACTION", "WHY"}, rows
}

func runBackupPrune(c *cli.Context) error {
	if err := noArgs(c, "; use --dir DIR"); err != nil {
		return err
	}
	r := backup.Retention{KeepLast: c.Int(flagKeepLast), KeepWithin: c.Duration(flagKeepWithin)}
	if err := r.Validate(); err != nil {
		return usageErrorf("%v", err)
	}
	dir, dry := c.String(flagBackupDir), c.Bool(flagDryRun)
	return runAction(c, func(ctx context.Context) (*output.Result, error) {
		pruned, err := action.PruneBackups(ctx, dir, r, dry)
		data := BackupPruneData{Dir: dir, DryRun: dry, Backups: []PrunedEntry{}}
		removed := 0
		for _, p := range pruned {
			e := PrunedEntry{Path: p.Dir, Removed: p.Removed, Why: p.Why}
			if p.Manifest != nil {
				e.Started, e.Release = p.Manifest.StartedAt, p.Manifest.Namespace+"/"+p.Manifest.Release
			}
			if p.Removed {
				removed++
			}
			data.Backups = append(data.Backups, e)
		}
		if err != nil {
			return nil, err
		}
		verb := "Removed"
		if dry {
			verb = "Would remove"
		}
		progress(c).OK(fmt.Sprintf("%s %d of %d backups in %s", verb, removed, len(pruned), dir))
		return output.NewResult("backup prune", output.StatusOK).WithData(data), nil
	})
}
