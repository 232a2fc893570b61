package upgrade

import (
	"context"
	"errors"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
)

// The PostgreSQL major-version phases: switch the StatefulSet to the new major on a new claim,
// restore the backup into it; their undo goes back to the old server and its data.

func (p *pipeline) skipUnlessMajor() (bool, string) {
	if p.pg == nil {
		return true, "Postgres major version unchanged"
	}
	return false, ""
}

func (p *pipeline) switchPostgres(ctx context.Context) error {
	if !p.verified {
		return errors.New("refusing to switch Postgres without a verified backup taken by this run")
	}
	var err error
	if p.oldPG, err = postgresStatefulSet(p.base.Manifest); err != nil {
		return fmt.Errorf("current release: %w", err)
	}
	if p.newPG, err = postgresStatefulSet(p.next.Manifest); err != nil {
		return fmt.Errorf("new release: %w", err)
	}
	if p.oldPG.Name != p.newPG.Name {
		return fmt.Errorf("Postgres StatefulSet renamed from %s to %s: not supported", p.oldPG.Name, p.newPG.Name)
	}
	p.newPVCs = newClaims(p.oldPG, p.newPG)
	for _, name := range p.newPVCs {
		_, err := p.sts.kube.CoreV1().PersistentVolumeClaims(p.sts.namespace).Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			return fmt.Errorf("volume %s for Postgres %s already exists (left by an earlier attempt?): check that it holds nothing you need, delete it (kubectl -n %s delete pvc %s) and run the upgrade again",
				name, p.pg.To, p.sts.namespace, name)
		}
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("reading PersistentVolumeClaim %s/%s: %w", p.sts.namespace, name, err)
		}
	}
	p.printf("stopping Postgres %s (its volume is kept) and starting Postgres %s on a new volume", p.pg.From, p.pg.To)
	if err := p.sts.remove(ctx, p.oldPG.Name); err != nil {
		return p.backToOldPostgres(ctx, err)
	}
	if err := p.sts.create(ctx, p.newPG); err != nil {
		return p.backToOldPostgres(ctx, err)
	}
	return nil
}

// backToOldPostgres undoes a switch that failed half-way (the phase is not complete, so its
// cleanup will not run).
func (p *pipeline) backToOldPostgres(ctx context.Context, cause error) error {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.o.Timeout)
	defer cancel()
	if err := p.sts.remove(cctx, p.oldPG.Name); err != nil {
		return errors.Join(cause, err)
	}
	if err := p.deleteNewClaims(cctx); err != nil {
		return errors.Join(cause, err)
	}
	if err := p.sts.create(cctx, p.oldPG); err != nil {
		return errors.Join(cause, fmt.Errorf("Postgres %s could not be restarted on its volume: %w", p.pg.From, err))
	}
	return fmt.Errorf("%w (Postgres %s restarted on its volume)", cause, p.pg.From)
}

func (p *pipeline) undoSwitchPostgres(ctx context.Context) (string, error) {
	if err := p.sts.remove(ctx, p.newPG.Name); err != nil {
		return "", err
	}
	if err := p.deleteOrphanPods(ctx); err != nil {
		return "", err
	}
	if err := p.deleteNewClaims(ctx); err != nil {
		return "", err
	}
	if p.helmChanged(ctx) {
		// The Helm rollback that follows creates the old StatefulSet.
		return fmt.Sprintf("stopped Postgres %s and deleted its new volume; the rollback restarts Postgres %s on its volume", p.pg.To, p.pg.From), nil
	}
	if err := p.sts.create(ctx, p.oldPG); err != nil {
		return "", err
	}
	return fmt.Sprintf("Postgres %s is running again on its volume (the new Postgres %s volume, a copy made by this run, was deleted)", p.pg.From, p.pg.To), nil
}

// newClaims lists the claims of the new StatefulSet that the old one does not have
// (<template>-<statefulset>-0: the chart runs one Postgres replica).
func newClaims(old, next *appsv1.StatefulSet) []string {
	had := map[string]bool{}
	for _, t := range old.Spec.VolumeClaimTemplates {
		had[t.Name] = true
	}
	var out []string
	for _, t := range next.Spec.VolumeClaimTemplates {
		if !had[t.Name] {
			out = append(out, fmt.Sprintf("%s-%s-0", t.Name, next.Name))
		}
	}
	return out
}

// deleteNewClaims removes the volumes this run created for the new server: they only hold a
// copy of the backup, and leaving them would make the next attempt start on stale data.
func (p *pipeline) deleteNewClaims(ctx context.Context) error {
	for _, name := range p.newPVCs {
		err := p.sts.kube.CoreV1().PersistentVolumeClaims(p.sts.namespace).Delete(ctx, name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting PersistentVolumeClaim %s/%s: %w", p.sts.namespace, name, err)
		}
	}
	return nil
}

// deleteOrphanPods removes Postgres pods left without a controller (orphaned for Helm to adopt
// when apply failed before Helm created the StatefulSet).
func (p *pipeline) deleteOrphanPods(ctx context.Context) error {
	if p.newPG.Spec.Selector == nil {
		return nil
	}
	pods := p.sts.kube.CoreV1().Pods(p.sts.namespace)
	list, err := pods.List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(p.newPG.Spec.Selector.MatchLabels).String()})
	if err != nil {
		return err
	}
	for _, pod := range list.Items {
		if metav1.GetControllerOf(&pod) == nil {
			if err := pods.Delete(ctx, pod.Name, metav1.DeleteOptions{}); err != nil {
				return fmt.Errorf("deleting orphaned pod %s: %w", pod.Name, err)
			}
		}
	}
	return nil
}

func (p *pipeline) restorePostgres(ctx context.Context) error {
	if err := p.o.Backuper.Restore(ctx, p.backupDir); err != nil {
		return fmt.Errorf("restoring %s into Postgres %s: %w", p.backupDir, p.pg.To, err)
	}
	return nil
}
