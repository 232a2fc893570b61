package release

import (
	"context"
	"errors"
	"fmt"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	helmrelease "helm.sh/helm/v3/pkg/release"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/render"
)

// Install creates the namespace (with the Pod Security labels of WithPodSecurity), stores the
// inputs, and installs the chart with wait (workloads and jobs ready) and a timeout.
//
// Helm's Atomic is off: on failure Install removes the partial release itself and deletes the
// PersistentVolumeClaims and Secrets this attempt created (those that existed before, e.g. kept
// by an earlier uninstall, are never touched), unless WithKeepOnFailure. A cancelled install is
// recorded failed and left in place: running install again replaces it.
func (c *Client) Install(ctx context.Context, ch *chart.Chart, vals map[string]any, opts ...InstallOption) (*Info, error) {
	o := buildActionOptions(opts)
	h, err := c.history()
	if err != nil {
		return nil, err
	}
	replace := false
	revision := 1
	if len(h) > 0 {
		last := h[len(h)-1]
		if last.Info.Status.IsPending() {
			return nil, &PendingError{Release: c.name, Namespace: c.namespace, Revision: last.Version, Status: last.Info.Status.String()}
		}
		if good, _ := c.LastGood(ctx, -1); good != nil {
			return nil, &AlreadyInstalledError{Release: c.name, Namespace: c.namespace, Revision: last.Version, Status: last.Info.Status.String()}
		}
		// Only failed or uninstalled revisions: a new install replaces them.
		replace = true
		revision = last.Version + 1
	}

	if !o.dryRun {
		// CRDs another release installed earlier (Helm then skips crds/) are brought up to date.
		if _, err := c.ApplyCRDs(ctx, ch); err != nil {
			return nil, err
		}
	}
	in := action.NewInstall(c.withContext(ctx))
	in.ReleaseName = c.name
	in.Namespace = c.namespace
	in.Wait = true
	in.WaitForJobs = true
	in.Timeout = o.timeout
	in.Replace = replace
	in.Description = o.description
	if o.dryRun {
		in.DryRun = true
		in.DryRunOption = "server" // lets the chart's lookup see existing Secrets
		rel, err := in.RunWithContext(ctx, ch, vals)
		if err != nil {
			return nil, fmt.Errorf("dry-run install of release %s/%s: %w", c.namespace, c.name, err)
		}
		info := infoOf(rel)
		return &info, nil
	}

	if o.podSecurity != nil {
		created, err := c.EnsureNamespace(ctx, *o.podSecurity)
		if err != nil {
			return nil, err
		}
		if created {
			c.progress("created namespace %s", c.namespace)
		}
	} else if _, err := c.EnsureNamespace(ctx, PodSecurity{}); err != nil {
		return nil, err
	}

	names, err := render.NamesOf(ch, vals, c.name)
	if err != nil {
		return nil, err
	}
	before, err := c.keptObjects(ctx, names)
	if err != nil {
		return nil, err
	}
	if o.inputs != nil {
		if err := c.SaveInputs(ctx, revision, *o.inputs); err != nil {
			return nil, err
		}
	}

	c.progress("installing release %s (chart %s) in namespace %s, waiting up to %s for workloads", c.name, chartRef(ch), c.namespace, o.timeout)
	// Cancellation reaches Helm through the kube client's waits (see ctxKubeClient), not through
	// RunWithContext's own context: that path records the failure a second time from a
	// goroutine that outlives the call and races with whatever runs next.
	rel, err := in.RunWithContext(context.WithoutCancel(ctx), ch, vals)
	if err == nil {
		info := infoOf(rel)
		return &info, nil
	}

	if ctx.Err() != nil {
		rev, ferr := c.FailPending(context.WithoutCancel(ctx), "install interrupted; marked failed by polyaxon-deploy")
		if ferr != nil {
			return nil, errors.Join(&InterruptedError{Op: "install", Release: c.name, Err: err}, ferr)
		}
		if rev == 0 && rel != nil && rel.Version > 0 {
			rev = rel.Version
		}
		return nil, &InterruptedError{Op: "install", Release: c.name, Revision: rev, Err: err,
			Hint: "run install again to replace it, or `polyaxon-deploy uninstall`"}
	}

	ierr := &InstallFailedError{Release: c.name, Err: err}
	stored, _ := c.last()
	if o.keepOnFailure || stored == nil || stored.Info.Status == helmrelease.StatusUninstalled {
		if !o.keepOnFailure {
			ierr.Removed = true // Helm failed before recording anything
		}
		return nil, ierr
	}
	cctx, cancel := cleanupContext(ctx, o.timeout)
	defer cancel()
	c.progress("install failed: %v; removing the partial release", err)
	if rerr := c.removeFailedInstall(cctx, names, before, o); rerr != nil {
		ierr.RemoveErr = rerr
	} else {
		ierr.Removed = true
	}
	return nil, ierr
}

// removeFailedInstall uninstalls the failed release and deletes the volumes and Secrets that this
// attempt created. A fresh database volume left behind would keep the first attempt's password
// while the next attempt generates a new one.
func (c *Client) removeFailedInstall(ctx context.Context, names render.Names, before keptSet, o actionOptions) error {
	un := action.NewUninstall(c.withContext(ctx))
	un.Wait = true
	un.Timeout = o.timeout
	un.Description = "failed install removed by polyaxon-deploy"
	if _, err := un.Run(c.name); err != nil {
		return fmt.Errorf("uninstalling failed release %s/%s: %w", c.namespace, c.name, err)
	}
	if err := c.deleteInputs(ctx); err != nil {
		return err
	}
	after, err := c.keptObjects(ctx, names)
	if err != nil {
		return err
	}
	var errs []error
	for name := range after.pvcs {
		if before.pvcs[name] {
			continue
		}
		if err := c.kube.CoreV1().PersistentVolumeClaims(c.namespace).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			errs = append(errs, fmt.Errorf("deleting PersistentVolumeClaim %s/%s: %w", c.namespace, name, err))
		}
	}
	for name := range after.secrets {
		if before.secrets[name] {
			continue
		}
		if err := c.kube.CoreV1().Secrets(c.namespace).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			errs = append(errs, fmt.Errorf("deleting Secret %s/%s: %w", c.namespace, name, err))
		}
	}
	return errors.Join(errs...)
}

func chartRef(ch *chart.Chart) string {
	if ch == nil || ch.Metadata == nil {
		return "?"
	}
	return ch.Metadata.Name + "-" + ch.Metadata.Version
}
