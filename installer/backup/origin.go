package backup

import (
	"errors"
	"fmt"

	"github.com/Masterminds/semver/v3"
)

// CheckOrigin returns ErrOtherRelease when a backup's manifest names another release or
// namespace than the target's (what is unknown on either side is not compared).
func CheckOrigin(m *Manifest, release, namespace string) error {
	if release == "" || m.Release == "" {
		return nil
	}
	if m.Release == release && (m.Namespace == "" || namespace == "" || m.Namespace == namespace) {
		return nil
	}
	return fmt.Errorf("%w: it was taken from release %s in namespace %s, and the target is release %s in namespace %s: restoring it would replace this release's database with another's; check --release and -n, or pass --force to restore it anyway",
		ErrOtherRelease, m.Release, orUnknown(m.Namespace), release, orUnknown(namespace))
}

func orUnknown(s string) string {
	if s == "" {
		return "(unknown)"
	}
	return s
}

// CheckAppVersion returns an error when a backup taken at backupApp is
// newer than runningApp (its schema may be unknown to the running app).
// Empty versions are not checked.
func CheckAppVersion(backupApp, runningApp string) error {
	if backupApp == "" || runningApp == "" {
		return nil
	}
	b, err1 := semver.NewVersion(backupApp)
	r, err2 := semver.NewVersion(runningApp)
	if err := errors.Join(err1, err2); err != nil {
		return fmt.Errorf("cannot compare the backup's app version %q with the running %q: %w (pass --force to restore anyway)", backupApp, runningApp, err)
	}
	if b.GreaterThan(r) {
		return fmt.Errorf("the backup was taken from app version %s, newer than the running %s: its schema may be unknown to %s; upgrade to %s first, or pass --force", backupApp, runningApp, runningApp, backupApp)
	}
	return nil
}
