package action

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/phase"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/release"
)

// Uninstall removes the release under its lock; volumes and the Secrets that go with the data
// are kept unless PurgeData (confirmed first, unless Yes).
type Uninstall struct {
	Env
	Release   *release.Client
	PurgeData bool
	Yes       bool
	Timeout   time.Duration
}

// uninstallRun is one uninstall's state, which its phases share (as installRun).
type uninstallRun struct {
	a    *Uninstall
	rc   *release.Client
	opts []release.UninstallOption
	res  *release.UninstallResult
}

// Run uninstalls and says what was kept or deleted.
func (a *Uninstall) Run(ctx context.Context) (*release.UninstallResult, error) {
	r := &uninstallRun{a: a, rc: a.Release, opts: []release.UninstallOption{release.WithTimeout(TimeoutOf(a.Timeout, nil))}}
	if err := a.run(ctx, r.phases()...); err != nil {
		return nil, err
	}
	res := r.res
	if res.Uninstalled {
		a.progress().OK(fmt.Sprintf("Release %s uninstalled", r.rc.Name()))
	}
	if len(res.KeptVolumes) > 0 {
		a.progress().Warn(fmt.Sprintf("kept volumes (data): %s; delete them with `polyaxon-deploy uninstall --purge-data`", strings.Join(res.KeptVolumes, ", ")))
	}
	if len(res.PurgedVolumes)+len(res.PurgedSecrets) > 0 {
		a.progress().OK(fmt.Sprintf("deleted volumes [%s] and Secrets [%s]", strings.Join(res.PurgedVolumes, ", "), strings.Join(res.PurgedSecrets, ", ")))
	}
	if len(res.PurgedNamespaces) > 0 {
		a.progress().OK(fmt.Sprintf("deleted the runs' namespace %s, with every run in it", strings.Join(res.PurgedNamespaces, ", ")))
	}
	return res, nil
}

// phases: the release (none is fine with PurgeData: what an earlier uninstall kept), the
// confirmation of PurgeData, the namespace, the lock, the uninstall.
func (r *uninstallRun) phases() []phase.Phase {
	return []phase.Phase{
		step("release", r.current),
		&phase.Func{Name: "confirm purge", Do: r.confirmPurge, SkipIf: func() (bool, string) { return !r.a.PurgeData, "no --purge-data" }},
		step("namespace", r.namespace),
		r.a.lock(r.rc.Lock(), r.rc),
		step("uninstall", r.uninstall),
	}
}

func (r *uninstallRun) current(ctx context.Context) error {
	if _, err := r.rc.Current(ctx); errors.Is(err, release.ErrNotInstalled) && !r.a.PurgeData {
		return err
	} else if err != nil && !errors.Is(err, release.ErrNotInstalled) {
		return err
	}
	return nil
}

// confirmPurge names the volumes that PurgeData deletes and asks first (unless Yes).
func (r *uninstallRun) confirmPurge(ctx context.Context) error {
	vols, err := r.rc.Volumes(ctx)
	if err != nil {
		return err
	}
	q := fmt.Sprintf("Uninstall release %s from namespace %s and DELETE its data: volumes [%s] and its Secrets (passwords, secret key)? This cannot be undone",
		r.rc.Name(), r.rc.Namespace(), strings.Join(vols, ", "))
	if err := r.a.confirm(r.a.Yes, q, "uninstall"); err != nil {
		return err
	}
	r.opts = append(r.opts, release.WithPurgeData())
	return nil
}

// namespace refuses a namespace that does not exist: the lock could not be taken there.
func (r *uninstallRun) namespace(ctx context.Context) error {
	ns := r.rc.Namespace()
	if _, err := r.rc.Kube().CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); apierrors.IsNotFound(err) {
		return fmt.Errorf("namespace %s does not exist: nothing to uninstall (check -n/--namespace)", ns)
	} else if err != nil {
		return fmt.Errorf("namespace %s: %w", ns, err)
	}
	return nil
}

func (r *uninstallRun) uninstall(ctx context.Context) (err error) {
	r.res, err = r.rc.Uninstall(ctx, r.opts...)
	return err
}
