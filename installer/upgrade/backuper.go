package upgrade

import (
	"context"
	"errors"
	"log/slog"

	helmrelease "helm.sh/helm/v3/pkg/release"
	"k8s.io/client-go/kubernetes"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/backup"
)

// TargetFunc reaches the release's database: the target, the deployed release, and a cleanup
// that ends what reaching it started (a client pod, a port-forward).
type TargetFunc func(ctx context.Context) (backup.Target, *backup.Release, func(context.Context) error, error)

// ReleaseBackuper is the pipeline's Backuper for a release, through installer/backup. Every
// call reaches the database afresh: after a Postgres major switch it is a new pod.
type ReleaseBackuper struct {
	Target TargetFunc
	// TargetOf reaches the database of a revision not deployed yet (RestoreInto).
	TargetOf func(ctx context.Context, rel *backup.Release) (backup.Target, func(context.Context) error, error)
	// Kube reads the release's Secrets (saved with the backup) and scales its writers down
	// for a restore.
	Kube kubernetes.Interface
	// Dir holds the backups (one sub-directory each).
	Dir string
	// ToolsDir holds pg_restore for Verify and Restore ("": $PATH).
	ToolsDir string
	// Logger receives installer/backup's logs (nil: none).
	Logger *slog.Logger
	// NewProgress, when set, makes the dump's progress callback; it is called at the start of
	// each backup, so a throttled callback counts from the dump, not from the upgrade's start.
	NewProgress func() func(rawBytes int64)
	// RegisterCleanup, when set, is handed the removal of an unfinished backup directory, for
	// a caller that may exit before the backup returns (see backup.WithCleanupRegistry).
	RegisterCleanup func(cleanup func()) (unregister func())
}

var _ Backuper = (*ReleaseBackuper)(nil)

func (b *ReleaseBackuper) Backup(ctx context.Context) (string, error) {
	target, rel, cleanup, err := b.Target(ctx)
	if err != nil {
		return "", err
	}
	defer func() { _ = cleanup(context.WithoutCancel(ctx)) }()
	opts := []backup.CreateOption{
		backup.WithLogger(b.logger()),
		backup.WithOutputDir(b.Dir),
		backup.WithRelease(rel.Info),
		backup.WithSecrets(backup.ReleaseSecrets(b.Kube, rel)),
	}
	if b.NewProgress != nil {
		opts = append(opts, backup.WithProgress(b.NewProgress()))
	}
	if b.RegisterCleanup != nil {
		opts = append(opts, backup.WithCleanupRegistry(b.RegisterCleanup))
	}
	m, err := backup.Create(ctx, target, opts...)
	if err != nil {
		return "", err
	}
	return m.Dir, nil
}

func (b *ReleaseBackuper) Verify(ctx context.Context, dir string) error {
	_, err := backup.Verify(ctx, dir, backup.WithLogger(b.logger()), backup.WithToolsDir(b.ToolsDir))
	return err
}

// Restore refuses a backup newer than the Polyaxon version running now, and stops the
// release's database writers while it runs.
func (b *ReleaseBackuper) Restore(ctx context.Context, dir string) error {
	target, rel, cleanup, err := b.Target(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = cleanup(context.WithoutCancel(ctx)) }()
	_, err = backup.Restore(ctx, target, dir,
		backup.WithLogger(b.logger()),
		backup.WithToolsDir(b.ToolsDir),
		backup.WithTargetRelease(rel.Info.Name, rel.Info.Namespace),
		backup.WithRunningAppVersion(rel.Info.AppVersion),
		backup.WithScaler(&backup.ReleaseScaler{Client: b.Kube, Namespace: rel.Info.Namespace, Names: rel.Names}),
	)
	return err
}

// RestoreInto restores into the database next describes, reached as for a deployed release,
// and refuses a table whose rows differ from the backup's count; the writers are the caller's
// to stop (a move stops them before its backup).
func (b *ReleaseBackuper) RestoreInto(ctx context.Context, dir string, next *helmrelease.Release) (*backup.RestoreReport, error) {
	if b.TargetOf == nil {
		return nil, errors.New("no way to reach a database that is not deployed yet")
	}
	rel, err := backup.ReleaseOf(next)
	if err != nil {
		return nil, err
	}
	target, cleanup, err := b.TargetOf(ctx, rel)
	if err != nil {
		return nil, err
	}
	defer func() { _ = cleanup(context.WithoutCancel(ctx)) }()
	m, err := backup.ReadManifest(dir)
	if err != nil {
		return nil, err
	}
	rep, err := backup.Restore(ctx, target, dir,
		backup.WithLogger(b.logger()),
		backup.WithToolsDir(b.ToolsDir),
		backup.WithTargetRelease(rel.Info.Name, rel.Info.Namespace),
		backup.WithRunningAppVersion(rel.Info.AppVersion),
	)
	if err != nil {
		return nil, err
	}
	if err := backup.CompareRows(m, rep.Rows); err != nil {
		return nil, err
	}
	return rep, nil
}

func (b *ReleaseBackuper) logger() *slog.Logger {
	if b.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return b.Logger
}
