package upgrade

import (
	"fmt"
	"regexp"

	"github.com/Masterminds/semver/v3"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/chartvalues"
)

// UpgradeFromAnnotation on the new chart is a semver constraint on the installed chart
// version: the oldest charts that can upgrade to it directly.
const UpgradeFromAnnotation = "polyaxon-deploy/upgrade-from"

// VersionError is a refused version change, with the fix.
type VersionError struct {
	Reason string
	Fix    string
}

func (e *VersionError) Error() string { return e.Reason + "; fix: " + e.Fix }

// CheckVersions guards the chart change from installed to next.
//
//   - A lower Polyaxon version (appVersion) is always refused, --force or not: its migrations
//     already ran and an older server cannot use that schema. Going back means a rollback plus a
//     restore of the backup taken before the upgrade.
//   - A lower chart version with the same appVersion (a chart-only change) is refused unless
//     force; it then returns a warning.
//   - A higher chart version must satisfy the new chart's polyaxon-deploy/upgrade-from
//     constraint (Masterminds semver: prereleases match only constraints written with one,
//     e.g. ">=2.0.0-0"). force does not override it: the chart declares the skip unsafe.
func CheckVersions(installed, next *chart.Metadata, force bool) (warnings []string, err error) {
	if installed == nil || next == nil {
		return nil, fmt.Errorf("chart metadata missing")
	}
	iv, err := semver.NewVersion(installed.Version)
	if err != nil {
		return nil, fmt.Errorf("installed chart version %q is not semver: %w", installed.Version, err)
	}
	nv, err := semver.NewVersion(next.Version)
	if err != nil {
		return nil, fmt.Errorf("new chart version %q is not semver: %w", next.Version, err)
	}
	if older, ok := appOlder(installed.AppVersion, next.AppVersion); ok && older {
		return nil, &VersionError{
			Reason: fmt.Sprintf("refusing to downgrade Polyaxon from %s (chart %s) to %s (chart %s): the database was migrated for %s and %s cannot run on it",
				installed.AppVersion, installed.Version, next.AppVersion, next.Version, installed.AppVersion, next.AppVersion),
			Fix: "use a chart with Polyaxon >= " + installed.AppVersion + "; to go back, `polyaxon-deploy rollback REVISION` and `polyaxon-deploy restore DIR` with the backup taken before the upgrade (--force does not override this)",
		}
	}
	switch nv.Compare(iv) {
	case -1:
		if !force {
			return nil, &VersionError{
				Reason: fmt.Sprintf("refusing to downgrade chart %s to %s", installed.Version, next.Version),
				Fix:    "use a chart >= " + installed.Version + ", or pass --force: Polyaxon stays at " + next.AppVersion + ", only the chart goes back",
			}
		}
		return []string{fmt.Sprintf("downgrading chart %s to %s (--force; Polyaxon %s unchanged)", installed.Version, next.Version, next.AppVersion)}, nil
	case 0:
		return nil, nil
	}
	ann := next.Annotations[UpgradeFromAnnotation]
	if ann == "" {
		return nil, nil
	}
	c, err := semver.NewConstraint(ann)
	if err != nil {
		return nil, fmt.Errorf("chart %s: annotation %s=%q is not a semver constraint: %w", next.Version, UpgradeFromAnnotation, ann, err)
	}
	if !c.Check(iv) {
		return nil, &VersionError{
			Reason: fmt.Sprintf("chart %s cannot upgrade the installed chart %s directly (it supports upgrades from %s)", next.Version, installed.Version, ann),
			Fix:    fmt.Sprintf("upgrade first to an intermediate chart version whose %s accepts %s, then to %s (--force does not override this)", UpgradeFromAnnotation, installed.Version, next.Version),
		}
	}
	return nil, nil
}

// appOlder reports next < installed when both app versions are semver.
func appOlder(installed, next string) (older, ok bool) {
	iv, err1 := semver.NewVersion(installed)
	nv, err2 := semver.NewVersion(next)
	if err1 != nil || err2 != nil {
		return false, false
	}
	return nv.LessThan(iv), true
}

var leadingDigits = regexp.MustCompile(`^[0-9]+`)

// PostgresWhere says where a release's database runs, from the chart defaults coalesced with
// its values: chartvalues.PostgresStatefulSet, PostgresCloudNativePG or PostgresExternal.
func PostgresWhere(ch *chart.Chart, vals map[string]any) (string, error) {
	all, err := chartutil.CoalesceValues(ch, vals)
	if err != nil {
		return "", fmt.Errorf("coalescing values of chart %s: %w", ch.Metadata.Version, err)
	}
	pg, err := all.Table("postgresql")
	if err != nil {
		return chartvalues.PostgresStatefulSet, nil
	}
	enabled, _ := pg["enabled"].(bool)
	mode, _ := pg["mode"].(string)
	return chartvalues.Postgresql{Enabled: enabled, Mode: mode}.Where(), nil
}

// OperandMajor returns the major version of a CloudNativePG Cluster's instances: the tag of
// postgresql.cloudnativepg.image, else postgresql.image.tag.
func OperandMajor(ch *chart.Chart, vals map[string]any) (string, error) {
	all, err := chartutil.CoalesceValues(ch, vals)
	if err != nil {
		return "", fmt.Errorf("coalescing values of chart %s: %w", ch.Metadata.Version, err)
	}
	tag, err := all.PathValue("postgresql.cloudnativepg.image.tag")
	if err != nil || fmt.Sprint(tag) == "" {
		if tag, err = all.PathValue("postgresql.image.tag"); err != nil {
			return "", nil
		}
	}
	return leadingDigits.FindString(fmt.Sprint(tag)), nil
}

// PostgresMajor returns the major version of the in-cluster Postgres (postgresql.image.tag,
// "16.4-bookworm" -> "16") from the chart defaults coalesced with the release's values, and
// whether the in-cluster Postgres is enabled at all.
func PostgresMajor(ch *chart.Chart, vals map[string]any) (major string, enabled bool, err error) {
	all, err := chartutil.CoalesceValues(ch, vals)
	if err != nil {
		return "", false, fmt.Errorf("coalescing values of chart %s: %w", ch.Metadata.Version, err)
	}
	pg, err := all.Table("postgresql")
	if err != nil {
		return "", false, nil
	}
	enabled, _ = pg["enabled"].(bool)
	tag, err := all.PathValue("postgresql.image.tag")
	if err != nil {
		return "", enabled, nil
	}
	return leadingDigits.FindString(fmt.Sprint(tag)), enabled, nil
}
