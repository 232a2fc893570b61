package release

import "time"

// DefaultTimeout bounds each Helm wait when the profile sets none.
const DefaultTimeout = 10 * time.Minute

// ActionOption configures one action (install, upgrade, rollback, uninstall, recover).
// Options that do not apply to an action are ignored by it.
type ActionOption func(*actionOptions)

type actionOptions struct {
	timeout       time.Duration
	inputs        *Inputs
	podSecurity   *PodSecurity
	dryRun        bool
	keepOnFailure bool
	noRollback    bool
	purgeData     bool
	description   string
}

func buildActionOptions(opts []ActionOption) actionOptions {
	o := actionOptions{timeout: DefaultTimeout}
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// WithTimeout bounds the wait for the release's workloads (and jobs) to be ready.
func WithTimeout(d time.Duration) ActionOption {
	return func(o *actionOptions) {
		if d > 0 {
			o.timeout = d
		}
	}
}

// WithInputs stores the user's inputs with the new revision (install, upgrade).
func WithInputs(in Inputs) ActionOption { return func(o *actionOptions) { o.inputs = &in } }

// WithPodSecurity labels the namespace before installing (install).
func WithPodSecurity(ps PodSecurity) ActionOption {
	return func(o *actionOptions) { o.podSecurity = &ps }
}

// WithDryRun renders and validates without changing the cluster (install, upgrade, rollback).
func WithDryRun() ActionOption { return func(o *actionOptions) { o.dryRun = true } }

// WithKeepOnFailure keeps a failed install in place for inspection instead of removing it (install).
func WithKeepOnFailure() ActionOption { return func(o *actionOptions) { o.keepOnFailure = true } }

// WithoutRollback leaves a failed upgrade failed instead of rolling back (upgrade; the upgrade
// pipeline uses it when it handles the rollback itself).
func WithoutRollback() ActionOption { return func(o *actionOptions) { o.noRollback = true } }

// WithPurgeData also deletes the release's PersistentVolumeClaims and kept Secrets (uninstall).
// The caller asks for confirmation first.
func WithPurgeData() ActionOption { return func(o *actionOptions) { o.purgeData = true } }

// WithDescription sets the revision's description shown by history.
func WithDescription(d string) ActionOption { return func(o *actionOptions) { o.description = d } }
