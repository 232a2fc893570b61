package backup

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// BackupRelease takes and verifies a backup of a release's database, with
// its Secrets: the step the upgrade pipeline runs before changing anything.
// The verify runs pg_restore locally, or in the database pod when the local
// client is missing or too old. Extra opts go to Create and Verify
// (WithOutputDir, WithLogger, WithCompression...).
func BackupRelease(ctx context.Context, k Kube, rel *Release, to TargetOptions, opts ...Option) (_ *Manifest, _ *Report, err error) {
	target, cleanup, err := ReleaseTarget(ctx, k, rel, to)
	if err != nil {
		return nil, nil, fmt.Errorf("backup of release %q: %w", rel.Info.Name, err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		err = errors.Join(err, cleanup(cctx))
	}()
	base := []Option{WithRelease(rel.Info), WithSecrets(ReleaseSecrets(k.Client, rel.Info.Namespace, rel.Info.Name))}
	m, err := Create(ctx, target, append(base, opts...)...)
	if err != nil {
		return nil, nil, err
	}
	rep, err := Verify(ctx, m.Dir, append([]Option{WithVerifyTarget(target)}, opts...)...)
	if err != nil {
		return m, nil, err
	}
	return m, rep, nil
}

// RestoreRelease restores a backup into a release's database: the writers
// are scaled down and back, and a backup from a newer app version than the
// deployed one is refused unless WithForce. Extra opts go to Restore.
func RestoreRelease(ctx context.Context, k Kube, rel *Release, dir string, to TargetOptions, opts ...Option) (_ *RestoreReport, err error) {
	target, cleanup, err := ReleaseTarget(ctx, k, rel, to)
	if err != nil {
		return nil, fmt.Errorf("restore into release %q: %w", rel.Info.Name, err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		err = errors.Join(err, cleanup(cctx))
	}()
	base := []Option{
		WithTargetRelease(rel.Info.Name, rel.Info.Namespace),
		WithRunningAppVersion(rel.Info.AppVersion),
		WithScaler(&ReleaseScaler{Client: k.Client, Namespace: rel.Info.Namespace, Release: rel.Info.Name}),
	}
	return Restore(ctx, target, dir, append(base, opts...)...)
}
