package release

import (
	"context"
	"time"

	helmrelease "helm.sh/helm/v3/pkg/release"
)

// DefaultTimeout bounds each Helm wait when the profile sets none.
const DefaultTimeout = 10 * time.Minute

// Each action takes options of its own type (kind's CreateOption): an option is of the types
// of the actions it applies to, so passing one to an action it does not apply to does not
// compile.
type (
	InstallOption interface {
		apply(*actionOptions)
		install()
	}
	UpgradeOption interface {
		apply(*actionOptions)
		upgrade()
	}
	RollbackOption interface {
		apply(*actionOptions)
		rollback()
	}
	UninstallOption interface {
		apply(*actionOptions)
		uninstall()
	}
	RecoverOption interface {
		apply(*actionOptions)
		recover()
	}
)

type actionOptions struct {
	timeout             time.Duration
	inputs              *Inputs
	podSecurity         *PodSecurity
	revisionPodSecurity RevisionPodSecurity
	dryRun              bool
	keepOnFailure       bool
	noRollback          bool
	purgeData           bool
	description         string
}

func buildActionOptions[O interface{ apply(*actionOptions) }](opts []O) actionOptions {
	o := actionOptions{timeout: DefaultTimeout}
	for _, opt := range opts {
		opt.apply(&o)
	}
	return o
}

// setter is the body of every option; the markers below say which actions take it.
type setter func(*actionOptions)

func (s setter) apply(o *actionOptions) { s(o) }

type (
	forInstall   struct{}
	forUpgrade   struct{}
	forRollback  struct{}
	forUninstall struct{}
	forRecover   struct{}
)

func (forInstall) install()     {}
func (forUpgrade) upgrade()     {}
func (forRollback) rollback()   {}
func (forUninstall) uninstall() {}
func (forRecover) recover()     {}

// Option types, named after the actions they apply to.
type (
	// AnyOption options apply to every action: WithTimeout, WithDryRun.
	AnyOption struct {
		setter
		forInstall
		forUpgrade
		forRollback
		forUninstall
		forRecover
	}
	// RevisionOption options apply to the actions that write a revision of their own:
	// WithDescription.
	RevisionOption struct {
		setter
		forInstall
		forUpgrade
		forRollback
		forUninstall
	}
	// InputsOption options apply to the actions that apply new inputs: WithInputs.
	InputsOption struct {
		setter
		forInstall
		forUpgrade
	}
	// InstallOnly options: WithPodSecurity, WithKeepOnFailure.
	InstallOnly struct {
		setter
		forInstall
	}
	// UpgradeOnly options: WithoutRollback.
	UpgradeOnly struct {
		setter
		forUpgrade
	}
	// RevisionBackOption options apply to the actions that put an earlier revision back:
	// WithRevisionPodSecurity.
	RevisionBackOption struct {
		setter
		forRollback
		forRecover
	}
	// UninstallOnly options: WithPurgeData.
	UninstallOnly struct {
		setter
		forUninstall
	}
)

// WithTimeout bounds the wait for the release's workloads (and jobs) to be ready.
func WithTimeout(d time.Duration) AnyOption {
	return AnyOption{setter: func(o *actionOptions) {
		if d > 0 {
			o.timeout = d
		}
	}}
}

// WithDryRun renders and validates without changing the cluster.
func WithDryRun() AnyOption {
	return AnyOption{setter: func(o *actionOptions) { o.dryRun = true }}
}

// WithDescription sets the revision's description shown by history.
func WithDescription(d string) RevisionOption {
	return RevisionOption{setter: func(o *actionOptions) { o.description = d }}
}

// WithInputs stores the user's inputs with the new revision.
func WithInputs(in Inputs) InputsOption {
	return InputsOption{setter: func(o *actionOptions) { o.inputs = &in }}
}

// WithPodSecurity labels the namespace before installing.
func WithPodSecurity(ps PodSecurity) InstallOnly {
	return InstallOnly{setter: func(o *actionOptions) { o.podSecurity = &ps }}
}

// RevisionPodSecurity is the namespace's Pod Security for a revision of the release (installer/action
// derives it from the revision's profile and manifest).
type RevisionPodSecurity func(ctx context.Context, rev *helmrelease.Release) (PodSecurity, error)

// WithRevisionPodSecurity labels the namespace for the revision a rollback re-applies, as an upgrade
// does for the revision it applies: a lower enforce level before the apply, every label after it.
func WithRevisionPodSecurity(f RevisionPodSecurity) RevisionBackOption {
	return RevisionBackOption{setter: func(o *actionOptions) { o.revisionPodSecurity = f }}
}

// WithKeepOnFailure keeps a failed install in place for inspection instead of removing it.
func WithKeepOnFailure() InstallOnly {
	return InstallOnly{setter: func(o *actionOptions) { o.keepOnFailure = true }}
}

// WithoutRollback leaves a failed upgrade failed instead of rolling back (the upgrade
// pipeline uses it when it handles the rollback itself).
func WithoutRollback() UpgradeOnly {
	return UpgradeOnly{setter: func(o *actionOptions) { o.noRollback = true }}
}

// WithPurgeData also deletes the release's PersistentVolumeClaims and kept Secrets. The caller
// asks for confirmation first.
func WithPurgeData() UninstallOnly {
	return UninstallOnly{setter: func(o *actionOptions) { o.purgeData = true }}
}
