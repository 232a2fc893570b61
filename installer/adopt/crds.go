package adopt

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"helm.sh/helm/v3/pkg/storage"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"
)

// The official chart renders its CRDs from templates/, so they belong to its release: Helm
// deletes what a release's manifest lists when the release is uninstalled, and deleting a CRD
// deletes every object of it, the runs. Taking them over is therefore two things: the CRD
// documents leave every stored revision of the old release (kept in the record, to be put
// back on undo), and the live CRDs lose Helm's ownership marks. The objects themselves are
// never deleted; ours then brings them to its chart's definition (release.ApplyCRDs).

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// Helm's ownership marks.
const (
	annReleaseName      = "meta.helm.sh/release-name"
	annReleaseNamespace = "meta.helm.sh/release-namespace"
	labelManagedBy      = "app.kubernetes.io/managed-by"
)

// docSeparator splits a Helm manifest into its documents, in order.
var docSeparator = regexp.MustCompile(`(?m)^---[ \t]*\n`)

// splitCRDs returns the manifest without its polyaxon.com CRD documents, and those documents.
func splitCRDs(manifest string) (kept string, crds []string) {
	var docs []string
	for _, d := range docSeparator.Split(manifest, -1) {
		if strings.TrimSpace(d) == "" {
			continue
		}
		var m manifestObject
		if err := yaml.Unmarshal([]byte(d), &m); err == nil && m.Kind == "CustomResourceDefinition" && strings.HasSuffix(m.Metadata.Name, ".polyaxon.com") {
			crds = append(crds, d)
			continue
		}
		docs = append(docs, d)
	}
	if len(crds) == 0 {
		return manifest, nil
	}
	if len(docs) == 0 {
		return "", crds
	}
	return "---\n" + strings.Join(docs, "---\n"), crds
}

// crdOwner changes the old release's hold on the CRDs.
type crdOwner struct {
	releases *storage.Storage // the old release's Helm storage
	dyn      dynamic.Interface
	old      *Old
}

// takeOver removes the CRD documents from every stored revision of the old release (the
// record keeps them first) and Helm's ownership marks from the live CRDs.
func (c *crdOwner) takeOver(ctx context.Context, rec *Record, save func() error) error {
	h, err := c.releases.History(c.old.Name)
	if err != nil {
		return fmt.Errorf("reading the history of release %s/%s: %w", c.old.Namespace, c.old.Name, err)
	}
	if rec.stripped == nil {
		rec.stripped = map[int][]string{}
	}
	type change struct {
		rev  int
		kept string
	}
	var changes []change
	for _, r := range h {
		kept, docs := splitCRDs(r.Manifest)
		if len(docs) == 0 {
			continue
		}
		if _, ok := rec.stripped[r.Version]; !ok {
			rec.stripped[r.Version] = docs
		}
		changes = append(changes, change{r.Version, kept})
		for _, d := range docs {
			var m manifestObject
			if yaml.Unmarshal([]byte(d), &m) == nil && !slices.Contains(rec.CRDs, m.Metadata.Name) {
				rec.CRDs = append(rec.CRDs, m.Metadata.Name)
			}
		}
	}
	for _, n := range c.old.CRDs {
		if !slices.Contains(rec.CRDs, n) {
			rec.CRDs = append(rec.CRDs, n)
		}
	}
	slices.Sort(rec.CRDs)
	// The documents are safe in the record before any revision loses them.
	if err := save(); err != nil {
		return err
	}
	for _, ch := range changes {
		r, err := c.releases.Get(c.old.Name, ch.rev)
		if err != nil {
			return err
		}
		r.Manifest = ch.kept
		if err := c.releases.Update(r); err != nil {
			return fmt.Errorf("removing the CRDs from revision %d of release %s/%s: %w", ch.rev, c.old.Namespace, c.old.Name, err)
		}
	}
	for _, name := range rec.CRDs {
		if err := c.setOwner(ctx, name, nil); err != nil {
			return err
		}
	}
	return nil
}

// giveBack undoes takeOver: the old release owns its CRDs again, in its manifests and on the
// live objects, so helm can upgrade or uninstall it as before.
func (c *crdOwner) giveBack(ctx context.Context, rec *Record) error {
	var errs []error
	for _, name := range rec.CRDs {
		errs = append(errs, c.setOwner(ctx, name, &helmOwner{release: c.old.Name, namespace: c.old.Namespace}))
	}
	for rev, docs := range rec.stripped {
		r, err := c.releases.Get(c.old.Name, rev)
		if err != nil {
			errs = append(errs, fmt.Errorf("revision %d of release %s/%s: %w", rev, c.old.Namespace, c.old.Name, err))
			continue
		}
		if _, has := splitCRDs(r.Manifest); len(has) > 0 {
			continue
		}
		r.Manifest = strings.TrimRight(r.Manifest, "\n") + "\n---\n" + strings.Join(docs, "---\n")
		errs = append(errs, c.releases.Update(r))
	}
	return errors.Join(errs...)
}

// helmOwner is the release Helm's ownership marks name.
type helmOwner struct{ release, namespace string }

// setOwner writes (owner) or removes (nil) Helm's ownership marks on a CRD. A CRD that is gone
// is left alone.
func (c *crdOwner) setOwner(ctx context.Context, name string, owner *helmOwner) error {
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:null,%q:null},"labels":{%q:null}}}`, annReleaseName, annReleaseNamespace, labelManagedBy)
	if owner != nil {
		patch = fmt.Sprintf(`{"metadata":{"annotations":{%q:%q,%q:%q},"labels":{%q:"Helm"}}}`, annReleaseName, owner.release, annReleaseNamespace, owner.namespace, labelManagedBy)
	}
	_, err := c.dyn.Resource(crdResource).Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("CRD %s: %w", name, err)
	}
	return nil
}

// ownedByOld reports the CRDs that still carry the old release's marks.
func (c *crdOwner) ownedByOld(ctx context.Context, names []string) ([]string, error) {
	var out []string
	for _, n := range names {
		crd, err := c.dyn.Resource(crdResource).Get(ctx, n, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		a := crd.GetAnnotations()
		if a[annReleaseName] == c.old.Name && a[annReleaseNamespace] == c.old.Namespace {
			out = append(out, n)
		}
	}
	return out, nil
}
