package release

import (
	"errors"
	"fmt"
)

// PendingError: the newest revision is pending-install|upgrade|rollback, left by a crashed run
// or by one still running.
type PendingError struct {
	Release, Namespace string
	Revision           int
	Status             string
}

func (e *PendingError) Error() string {
	return fmt.Sprintf("release %s/%s revision %d is %s: another run is still going or one crashed; "+
		"if none is running, run `polyaxon-deploy recover -n %s --release %s`",
		e.Namespace, e.Release, e.Revision, e.Status, e.Namespace, e.Release)
}

// AlreadyInstalledError: install found a release that ran successfully before.
type AlreadyInstalledError struct {
	Release, Namespace string
	Revision           int
	Status             string
}

func (e *AlreadyInstalledError) Error() string {
	return fmt.Sprintf("release %s/%s is already installed (revision %d, %s): use `polyaxon-deploy upgrade` to change it",
		e.Namespace, e.Release, e.Revision, e.Status)
}

// InterruptedError: the action was cancelled (SIGINT/SIGTERM). Revision, when set, was recorded
// as failed, never left pending.
type InterruptedError struct {
	Op       string
	Release  string
	Revision int
	Hint     string
	Err      error
}

func (e *InterruptedError) Error() string {
	msg := fmt.Sprintf("%s of release %s interrupted", e.Op, e.Release)
	if e.Revision > 0 {
		msg += fmt.Sprintf("; revision %d marked failed", e.Revision)
	}
	if e.Hint != "" {
		msg += "; " + e.Hint
	}
	return msg
}

func (e *InterruptedError) Unwrap() error { return e.Err }

// UpgradeFailedError: Helm's upgrade failed; RolledBackTo says which revision was restored.
type UpgradeFailedError struct {
	Release      string
	Revision     int // the failed revision (0 if Helm failed before creating it)
	RolledBackTo int
	RollbackErr  error
	Err          error
}

func (e *UpgradeFailedError) Error() string {
	msg := fmt.Sprintf("upgrade of release %s failed", e.Release)
	if e.Revision > 0 {
		msg += fmt.Sprintf(" (revision %d)", e.Revision)
	}
	msg += ": " + e.Err.Error()
	switch {
	case e.RollbackErr != nil:
		msg += fmt.Sprintf("; rolling back to revision %d ALSO failed: %v; run `polyaxon-deploy rollback %d` once the cause is fixed",
			e.RolledBackTo, e.RollbackErr, e.RolledBackTo)
	case e.RolledBackTo > 0:
		msg += fmt.Sprintf("; rolled back to revision %d, which is running again", e.RolledBackTo)
	}
	return msg
}

func (e *UpgradeFailedError) Unwrap() error { return e.Err }

// InstallFailedError: Helm's install failed; Removed says whether the partial release was uninstalled.
type InstallFailedError struct {
	Release   string
	Removed   bool
	RemoveErr error
	Err       error
}

func (e *InstallFailedError) Error() string {
	msg := fmt.Sprintf("install of release %s failed: %v", e.Release, e.Err)
	switch {
	case e.RemoveErr != nil:
		msg += fmt.Sprintf("; removing the partial release ALSO failed: %v; run `polyaxon-deploy uninstall`", e.RemoveErr)
	case e.Removed:
		msg += "; the partial release was removed (volumes and secrets that existed before were kept)"
	default:
		msg += "; the failed release was kept for inspection: fix the cause and run install again (it replaces the failed release), or `polyaxon-deploy uninstall`"
	}
	return msg
}

func (e *InstallFailedError) Unwrap() error { return e.Err }

// IsInterrupted reports whether err comes from a cancelled action.
func IsInterrupted(err error) bool {
	var ie *InterruptedError
	return errors.As(err, &ie)
}
