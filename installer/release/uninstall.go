package release

import (
	"context"
	"errors"
	"fmt"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"maps"
	"slices"
	"strings"
	"time"

	"helm.sh/helm/v3/pkg/action"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/cnpg"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/facts"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/render"
)

// UninstallResult lists what was removed and what stays.
type UninstallResult struct {
	Release string `json:"release"`
	// Uninstalled is false when there was no release (a purge of leftovers only).
	Uninstalled bool `json:"uninstalled"`
	// Kept: objects the chart marks helm.sh/resource-policy=keep, as Helm reports them.
	Kept string `json:"kept,omitempty"`
	// KeptVolumes: PersistentVolumeClaims left in place (none after a purge).
	KeptVolumes   []string `json:"keptVolumes,omitempty"`
	PurgedVolumes []string `json:"purgedVolumes,omitempty"`
	PurgedSecrets []string `json:"purgedSecrets,omitempty"`
	// PurgedDatabases are the CloudNativePG Clusters deleted, with their instances' claims.
	PurgedDatabases []string `json:"purgedDatabases,omitempty"`
	// PurgedNamespaces: the runs' own namespace the release created, with every run in it.
	PurgedNamespaces []string `json:"purgedNamespaces,omitempty"`
}

type keptSet struct{ pvcs, secrets map[string]bool }

// keptObjects lists the release's PersistentVolumeClaims and Secrets (selected by the release's
// own labels): the objects that outlive an uninstall (the chart keeps them) and that a purge
// deletes.
func (c *Client) keptObjects(ctx context.Context, names render.Names) (keptSet, error) {
	s := keptSet{pvcs: map[string]bool{}, secrets: map[string]bool{}}
	if len(names.Selector) == 0 {
		return s, nil // nothing of the release's is left to select
	}
	sel := metav1.ListOptions{LabelSelector: names.SelectorString()}
	pvcs, err := c.kube.CoreV1().PersistentVolumeClaims(c.namespace).List(ctx, sel)
	if err != nil {
		return s, fmt.Errorf("listing PersistentVolumeClaims of release %s/%s: %w", c.namespace, c.name, err)
	}
	for _, p := range pvcs.Items {
		s.pvcs[p.Name] = true
	}
	secrets, err := c.kube.CoreV1().Secrets(c.namespace).List(ctx, sel)
	if err != nil {
		return s, fmt.Errorf("listing Secrets of release %s/%s: %w", c.namespace, c.name, err)
	}
	for _, p := range secrets.Items {
		s.secrets[p.Name] = true
	}
	return s, nil
}

// Names are the release's names and labels, from its newest revision's chart and values. With
// no revision left (an earlier uninstall kept volumes), the name label is read from what the
// chart kept: the release's objects marked helm.sh/resource-policy=keep (its Secrets and
// claims); several names there are an error, as no selector would be safe.
func (c *Client) Names(ctx context.Context) (render.Names, error) {
	if last, err := c.last(); err == nil {
		return render.NamesOfRelease(last)
	} else if !errors.Is(err, ErrNotInstalled) {
		return render.Names{}, err
	}
	sel := metav1.ListOptions{LabelSelector: labels.SelectorFromSet(labels.Set{labelInstance: c.name}).String()}
	found := map[string][]string{} // name label -> kept objects carrying it
	note := func(kind string, m metav1.ObjectMeta) {
		if m.Annotations[annResourcePolicy] == "keep" && m.Labels[labelName] != "" {
			found[m.Labels[labelName]] = append(found[m.Labels[labelName]], kind+"/"+m.Name)
		}
	}
	secrets, err := c.kube.CoreV1().Secrets(c.namespace).List(ctx, sel)
	if err != nil {
		return render.Names{}, fmt.Errorf("listing the Secrets release %s/%s kept: %w", c.namespace, c.name, err)
	}
	for _, s := range secrets.Items {
		note("Secret", s.ObjectMeta)
	}
	pvcs, err := c.kube.CoreV1().PersistentVolumeClaims(c.namespace).List(ctx, sel)
	if err != nil {
		return render.Names{}, fmt.Errorf("listing the PersistentVolumeClaims release %s/%s kept: %w", c.namespace, c.name, err)
	}
	for _, p := range pvcs.Items {
		note("PersistentVolumeClaim", p.ObjectMeta)
	}
	switch len(found) {
	case 0:
		return render.Names{Release: c.name}, nil
	case 1:
		for name := range found {
			return render.Names{Release: c.name, Name: name, Selector: map[string]string{labelName: name, labelInstance: c.name}}, nil
		}
	}
	var which []string
	for _, name := range slices.Sorted(maps.Keys(found)) {
		which = append(which, fmt.Sprintf("%s=%s (%s)", labelName, name, strings.Join(found[name], ", ")))
	}
	return render.Names{}, fmt.Errorf("release %s/%s is gone and the objects kept under its instance label name several charts: %s; delete the ones you mean with kubectl",
		c.namespace, c.name, strings.Join(which, "; "))
}

// Labels of the chart's objects (selectorLabels), and the annotation on those it keeps.
const (
	labelName         = "app.kubernetes.io/name"
	labelInstance     = "app.kubernetes.io/instance"
	annResourcePolicy = "helm.sh/resource-policy"
)

// Volumes lists the release's PersistentVolumeClaims (what a purge would delete), for the
// confirmation prompt.
func (c *Client) Volumes(ctx context.Context) ([]string, error) {
	names, err := c.Names(ctx)
	if err != nil {
		return nil, err
	}
	k, err := c.keptObjects(ctx, names)
	if err != nil {
		return nil, err
	}
	return slices.Sorted(maps.Keys(k.pvcs)), nil
}

// Uninstall removes the release and its history. The chart keeps PersistentVolumeClaims (and
// backups are local files, never touched); WithPurgeData deletes the release's
// PersistentVolumeClaims and its remaining Secrets too (the caller confirms first). With
// WithPurgeData and no release left, it purges what an earlier uninstall kept.
func (c *Client) Uninstall(ctx context.Context, opts ...UninstallOption) (*UninstallResult, error) {
	o := buildActionOptions(opts)
	res := &UninstallResult{Release: c.name}
	h, err := c.history()
	if err != nil {
		return nil, err
	}
	if len(h) == 0 && !o.purgeData {
		return nil, fmt.Errorf("release %q in namespace %q: %w", c.name, c.namespace, ErrNotInstalled)
	}
	// Read before the revisions go: they say which labels the release's objects carry.
	names, err := c.Names(ctx)
	if err != nil {
		if o.purgeData {
			return nil, err
		}
		// Another chart's release (adopt removes the official one): without our name helpers
		// its kept objects are not listed, and nothing is purged.
		names = render.Names{Release: c.name}
	}
	if len(h) > 0 {
		un := action.NewUninstall(c.withContext(ctx))
		un.Wait = true
		un.Timeout = o.timeout
		un.DryRun = o.dryRun
		un.Description = o.description
		c.progress("uninstalling release %s from namespace %s", c.name, c.namespace)
		resp, err := un.Run(c.name)
		if err != nil {
			if ctx.Err() != nil {
				return nil, &InterruptedError{Op: "uninstall", Release: c.name, Err: err, Hint: "run uninstall again"}
			}
			return nil, fmt.Errorf("uninstalling release %s/%s: %w", c.namespace, c.name, err)
		}
		res.Uninstalled = true
		if resp != nil {
			res.Kept = strings.TrimSpace(resp.Info)
		}
		if o.dryRun {
			return res, nil
		}
	}
	if err := c.deleteInputs(ctx); err != nil {
		return res, err
	}
	if err := (facts.Store{Kube: c.kube, Namespace: c.namespace, Release: c.name}).Delete(ctx); err != nil {
		return res, err
	}
	kept, err := c.keptObjects(ctx, names)
	if err != nil {
		return res, err
	}
	if !o.purgeData {
		res.KeptVolumes = slices.Sorted(maps.Keys(kept.pvcs))
		return res, nil
	}
	var errs []error
	// A CloudNativePG Cluster first: it owns its instances' claims and would make them again.
	if !o.dryRun {
		clusters, err := cnpg.DeleteClusters(ctx, c.kube, c.namespace, names.SelectorString())
		res.PurgedDatabases = clusters
		if err != nil {
			errs = append(errs, err)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(kept.pvcs)) {
		if o.dryRun {
			res.PurgedVolumes = append(res.PurgedVolumes, name)
			continue
		}
		if err := c.kube.CoreV1().PersistentVolumeClaims(c.namespace).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			errs = append(errs, fmt.Errorf("deleting PersistentVolumeClaim %s/%s: %w", c.namespace, name, err))
			continue
		}
		res.PurgedVolumes = append(res.PurgedVolumes, name)
	}
	for _, name := range slices.Sorted(maps.Keys(kept.secrets)) {
		if o.dryRun {
			res.PurgedSecrets = append(res.PurgedSecrets, name)
			continue
		}
		if err := c.kube.CoreV1().Secrets(c.namespace).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			errs = append(errs, fmt.Errorf("deleting Secret %s/%s: %w", c.namespace, name, err))
			continue
		}
		res.PurgedSecrets = append(res.PurgedSecrets, name)
	}
	namespaces, err := c.runsNamespaces(ctx)
	if err != nil {
		errs = append(errs, err)
	}
	for _, name := range namespaces {
		if !o.dryRun {
			if err := c.deleteNamespace(ctx, name, o.timeout); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		res.PurgedNamespaces = append(res.PurgedNamespaces, name)
	}
	return res, errors.Join(errs...)
}

// deleteNamespace deletes a namespace and waits, up to timeout (a minute when unset), until it
// is gone: until then no object can be created in it, and the next install would be refused.
func (c *Client) deleteNamespace(ctx context.Context, name string, timeout time.Duration) error {
	if err := c.kube.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting namespace %s: %w", name, err)
	}
	if timeout <= 0 {
		timeout = time.Minute
	}
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		_, err := c.kube.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
	if err != nil {
		return fmt.Errorf("namespace %s is still being deleted after %s: %w", name, timeout, err)
	}
	return nil
}

// runsNamespaces are the namespaces this release created for its runs (the chart keeps them on
// uninstall): Helm's ownership annotations name this release, and the chart's labels the runs.
func (c *Client) runsNamespaces(ctx context.Context) ([]string, error) {
	list, err := c.kube.CoreV1().Namespaces().List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=runs"})
	if err != nil {
		return nil, fmt.Errorf("listing the runs' namespaces: %w", err)
	}
	var out []string
	for _, ns := range list.Items {
		a := ns.Annotations
		if a["meta.helm.sh/release-name"] == c.name && a["meta.helm.sh/release-namespace"] == c.namespace && ns.Name != c.namespace {
			out = append(out, ns.Name)
		}
	}
	return out, nil
}
