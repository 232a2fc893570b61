package adopt

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/chartvalues"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/polyaxonversion"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/render"
)

// PlannedPhase is one phase of --dry-run's plan and what it would touch.
type PlannedPhase struct {
	Phase   string   `json:"phase"`
	Touches []string `json:"touches"`
}

// Phases is --dry-run's plan.
type Phases []PlannedPhase

// Table is the plan as rows (-o table): each phase and what it touches.
func (p Phases) Table() ([]string, [][]string) {
	var rows [][]string
	for _, ph := range p {
		for i, t := range ph.Touches {
			name := ph.Phase
			if i > 0 {
				name = ""
			}
			rows = append(rows, []string{name, t})
		}
	}
	return []string{"PHASE", "WHAT IT TOUCHES"}, rows
}

// Plan says what Run would do, phase by phase, after the same refusals as Run; it changes
// nothing (it reads the old release and asks its database server for its version).
func Plan(ctx context.Context, o Options) (Phases, error) {
	defaults(&o)
	old, err := Inspect(ctx, o)
	if err != nil {
		return nil, err
	}
	ns, ours := o.Ours.Namespace(), o.Ours.Name()
	merged, err := render.MergedValues(o.Chart, o.Values)
	if err != nil {
		return nil, err
	}
	typed, err := chartvalues.Of(merged)
	if err != nil {
		return nil, err
	}
	rendered, err := render.Render(o.Chart, o.Values, render.Options{ReleaseName: ours, Namespace: ns, SkipKubeVersionCheck: true})
	if err != nil {
		return nil, err
	}
	pod, err := postgresPod(ctx, o.Kube, old)
	if err != nil {
		return nil, err
	}
	objs := func(list []Object) string {
		var s []string
		for _, w := range list {
			s = append(s, w.String())
		}
		return strings.Join(s, ", ")
	}

	names, err := render.NamesOf(o.Chart, o.Values, ours)
	if err != nil {
		return nil, err
	}
	var carried []string
	for _, c := range carryPlan(names, typed, old) {
		var keys []string
		for _, k := range slices.Sorted(maps.Keys(c.keys)) {
			src := c.keys[k]
			keys = append(keys, fmt.Sprintf("%s <- %s/%s", k, src.secret, src.key))
		}
		carried = append(carried, fmt.Sprintf("Secret %s (created, owned by release %s): %s", c.name, ours, strings.Join(keys, ", ")))
	}
	crds := old.CRDs
	if len(crds) == 0 {
		crds = []string{"(none in its manifest)"}
	}
	w := &workloads{kube: o.Kube, ns: old.Namespace}
	var stop, keep []string
	for _, s := range old.Stateful {
		ok, err := w.keepsData(ctx, s.Name)
		if err != nil {
			return nil, err
		}
		if ok {
			stop = append(stop, s.String())
		} else {
			keep = append(keep, s.String()+" (no volume: left running)")
		}
	}
	claims, err := w.claimsOf(ctx, old.Stateful)
	if err != nil {
		return nil, err
	}
	volume := "(persistence off)"
	for _, m := range rendered.All() {
		if m.Kind() != "StatefulSet" || m.Object.GetLabels()["app.kubernetes.io/component"] != "postgresql" {
			continue
		}
		if tpls, ok := m.Object.Object["spec"].(map[string]any)["volumeClaimTemplates"].([]any); ok && len(tpls) > 0 {
			if md, ok := tpls[0].(map[string]any)["metadata"].(map[string]any); ok {
				volume = fmt.Sprintf("PersistentVolumeClaim %v-%s-0 (new, empty)", md["name"], m.Name())
			}
		}
	}
	version := polyaxonversion.Of(o.Chart.Metadata, o.Values)
	removeOld := "skipped: pass --remove-old once ours serves well (adopt run again does only this)"
	if o.RemoveOld {
		removeOld = fmt.Sprintf("helm uninstall %s -n %s (its CRDs are no longer in its manifest: kept, with their objects)", old.Name, old.Namespace)
		if o.PurgeOldData {
			removeOld += "; deletes its volumes " + strings.Join(claims, ", ")
		} else if len(claims) > 0 {
			removeOld += "; keeps its volumes " + strings.Join(claims, ", ")
		}
	}
	sort.Strings(carried)
	plan := Phases{
		{PhaseLock, []string{fmt.Sprintf("Lease %s/%s-polyaxon-deploy-lock", ns, ours)}},
		{PhaseInspect, []string{fmt.Sprintf("reads release %s/%s (chart %s, Polyaxon %s, revision %d) and its values; PostgreSQL version through exec in %s", old.Namespace, old.Name, old.ChartVersion, old.AppVersion, old.Revision, pod)}},
		{PhaseChecks, []string{"the preflight checks of an install of " + ours + " (the old release's CRDs count as taken over)"}},
		{PhaseStopPlatform, []string{"scales to 0 (replicas kept in the annotation " + ReplicasAnnotation + "): " + objs(old.Platform)}},
		{PhaseBackup, []string{fmt.Sprintf("pg_dump through exec in pod %s/%s container %s, verified, into %s/%s-<UTC time>/ with the old Secrets", old.Namespace, pod, bitnamiPGCntr, o.BackupDir, old.Name)}},
		{PhaseSecrets, carried},
		{PhaseCRDs, []string{"CRDs " + strings.Join(crds, ", ") + fmt.Sprintf(": leave the manifest of each of the %d revision(s) of %s (kept in Secret %s/%s); Helm's ownership marks removed; no object touched", old.Revisions, old.Name, ns, RecordName(ours))}},
		{PhaseStopDatabase, append([]string{"scales to 0: " + strings.Join(stop, ", ")}, keep...)},
		{PhaseInstall, []string{fmt.Sprintf("installs release %s (chart %s, Polyaxon %s) in namespace %s; its Postgres on %s", ours, o.Chart.Metadata.Version, version, ns, volume)}},
		{PhaseRestore, []string{"pg_restore of the backup into the Postgres pod of " + ours + " (its writers scaled down meanwhile); row counts compared with the old database"}},
		{PhaseMigrate, []string{"the migration Job of Polyaxon " + version}},
		{PhasePostChecks, []string{"the checks of an installed release; POLYAXON_SECRET_KEY of ours equals the old one"}},
		{PhaseRemoveOld, []string{removeOld}},
	}
	if !o.runsMigrationJob() {
		plan[10].Touches = []string{"skipped: no installer-run migration Job"}
	}
	return plan, nil
}
