package action

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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

// Run uninstalls and says what was kept or deleted.
func (a *Uninstall) Run(ctx context.Context) (*release.UninstallResult, error) {
	rc := a.Release
	if _, err := rc.Current(ctx); errors.Is(err, release.ErrNotInstalled) && !a.PurgeData {
		return nil, err
	} else if err != nil && !errors.Is(err, release.ErrNotInstalled) {
		return nil, err
	}
	opts := []release.UninstallOption{release.WithTimeout(TimeoutOf(a.Timeout, nil))}
	if a.PurgeData {
		vols, err := rc.Volumes(ctx)
		if err != nil {
			return nil, err
		}
		q := fmt.Sprintf("Uninstall release %s from namespace %s and DELETE its data: volumes [%s] and its Secrets (passwords, secret key)? This cannot be undone",
			rc.Name(), rc.Namespace(), strings.Join(vols, ", "))
		if err := a.confirm(a.Yes, q, "uninstall"); err != nil {
			return nil, err
		}
		opts = append(opts, release.WithPurgeData())
	}
	if _, err := rc.Kube().CoreV1().Namespaces().Get(ctx, rc.Namespace(), metav1.GetOptions{}); apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("namespace %s does not exist: nothing to uninstall (check -n/--namespace)", rc.Namespace())
	} else if err != nil {
		return nil, fmt.Errorf("namespace %s: %w", rc.Namespace(), err)
	}
	var res *release.UninstallResult
	err := a.run(ctx, a.lock(rc.Lock(), rc), step("uninstall", func(ctx context.Context) (err error) {
		res, err = rc.Uninstall(ctx, opts...)
		return err
	}))
	if err != nil {
		return nil, err
	}
	if res.Uninstalled {
		a.progress().OK(fmt.Sprintf("Release %s uninstalled", rc.Name()))
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
