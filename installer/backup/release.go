package backup

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/chartvalues"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/polyaxonversion"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/render"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
	"k8s.io/client-go/kubernetes"
)

// Release is a deployed Helm release with its effective values.
type Release struct {
	Info   ReleaseInfo
	Values map[string]any // chart defaults coalesced with the user's values
	// ChartValues are the values the installer reads, typed.
	ChartValues *chartvalues.Values
	// Names are the release's object names and labels, from its own chart's helpers.
	Names render.Names
}

// LoadRelease reads the deployed revision of a Helm release from its
// storage (Secrets, else ConfigMaps) in namespace.
func LoadRelease(ctx context.Context, client kubernetes.Interface, namespace, name string) (*Release, error) {
	query := map[string]string{"name": name, "owner": "helm", "status": "deployed"}
	var rels []*release.Release
	var errs []error
	for _, d := range []driver.Driver{
		driver.NewSecrets(client.CoreV1().Secrets(namespace)),
		driver.NewConfigMaps(client.CoreV1().ConfigMaps(namespace)),
	} {
		r, err := d.Query(query)
		if err == nil && len(r) > 0 {
			rels = r
			break
		}
		if err != nil && !errors.Is(err, driver.ErrReleaseNotFound) {
			errs = append(errs, err)
		}
	}
	if len(rels) == 0 {
		return nil, fmt.Errorf("release %q in namespace %q: no deployed revision found: %w", name, namespace, errors.Join(append(errs, driver.ErrReleaseNotFound)...))
	}
	sort.Slice(rels, func(i, j int) bool { return rels[i].Version > rels[j].Version })
	return ReleaseOf(rels[0])
}

// ReleaseOf reads what reaching a revision's database takes from the revision itself: the
// deployed one (LoadRelease), or one not applied yet (the target of a database move).
func ReleaseOf(rel *release.Release) (*Release, error) {
	name := rel.Name
	out := &Release{Info: ReleaseInfo{Name: rel.Name, Namespace: rel.Namespace, Revision: rel.Version}}
	vals := map[string]any{}
	if rel.Chart != nil {
		if rel.Chart.Metadata != nil {
			out.Info.ChartVersion, out.Info.AppVersion = rel.Chart.Metadata.Version, polyaxonversion.Of(rel.Chart.Metadata, rel.Config)
		}
		v, err := chartutil.CoalesceValues(rel.Chart, rel.Config)
		if err != nil {
			return nil, fmt.Errorf("release %q: values: %w", name, err)
		}
		vals = v
	}
	out.Values = vals
	typed, err := chartvalues.Of(vals)
	if err != nil {
		return nil, fmt.Errorf("release %q: %w", name, err)
	}
	out.ChartValues = typed
	names, err := render.NamesOfRelease(rel)
	if err != nil {
		return nil, err
	}
	out.Names = names
	return out, nil
}

// ReleaseSecrets returns a SecretsFunc saving the release's Secrets as a
// Kubernetes v1 List that `kubectl apply -f` accepts (server-owned metadata
// stripped): the Secrets the chart labels, and those the user manages and names in the
// release's values (every `existingSecret`: secrets.existingSecret holds the platform's key).
// A named Secret that does not exist is left out (its component may be off).
func ReleaseSecrets(client kubernetes.Interface, rel *Release) SecretsFunc {
	namespace, names := rel.Info.Namespace, rel.Names
	return func(ctx context.Context) ([]byte, []string, error) {
		list, err := client.CoreV1().Secrets(namespace).List(ctx, metav1.ListOptions{LabelSelector: names.SelectorString()})
		if err != nil {
			return nil, nil, fmt.Errorf("listing Secrets of release %q in %q: %w", names.Release, namespace, err)
		}
		found := map[string]corev1.Secret{}
		for _, s := range list.Items {
			found[s.Name] = s
		}
		for _, ref := range ExistingSecrets(rel.Values) {
			if _, ok := found[ref.Name]; ok {
				continue
			}
			s, err := client.CoreV1().Secrets(namespace).Get(ctx, ref.Name, metav1.GetOptions{})
			if isNotFound(err) {
				continue
			}
			if err != nil {
				return nil, nil, fmt.Errorf("reading Secret %s/%s (named by %s): %w", namespace, ref.Name, ref.Path, err)
			}
			found[s.Name] = *s
		}
		items := make([]corev1.Secret, 0, len(found))
		for _, name := range slices.Sorted(maps.Keys(found)) {
			s := found[name]
			items = append(items, corev1.Secret{
				TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
				ObjectMeta: metav1.ObjectMeta{
					Name: s.Name, Namespace: s.Namespace, Labels: s.Labels, Annotations: s.Annotations,
				},
				Type: s.Type, Data: s.Data, Immutable: s.Immutable,
			})
		}
		doc := corev1.SecretList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "List"}, Items: items}
		b, err := json.MarshalIndent(doc, "", "  ")
		if err != nil {
			return nil, nil, err
		}
		return append(b, '\n'), slices.Sorted(maps.Keys(found)), nil
	}
}

// SecretRef is a Secret named in values, with the value's path.
type SecretRef struct{ Path, Name string }

// ExistingSecrets lists the Secrets the values name (every non-empty `existingSecret`, the
// chart's one spelling for a Secret the user manages), sorted by path.
func ExistingSecrets(vals map[string]any) []SecretRef {
	var out []SecretRef
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		for k, v := range m {
			p := k
			if prefix != "" {
				p = prefix + "." + k
			}
			switch t := v.(type) {
			case map[string]any:
				walk(p, t)
			case string:
				if k == "existingSecret" && t != "" {
					out = append(out, SecretRef{Path: p, Name: t})
				}
			}
		}
	}
	walk("", vals)
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// FindPostgresPod returns the running chart postgresql pod of a release.
func FindPostgresPod(ctx context.Context, client kubernetes.Interface, namespace string, names render.Names) (string, error) {
	sel := names.ComponentSelector("postgresql")
	pods, err := client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return "", fmt.Errorf("finding the postgresql pod (%s) in %q: %w", sel, namespace, err)
	}
	var running []string
	for _, p := range pods.Items {
		// Not an instance of a CloudNativePG Cluster kept from before a move: it carries the
		// same labels.
		if _, ok := p.Labels["cnpg.io/cluster"]; ok {
			continue
		}
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			running = append(running, p.Name)
		}
	}
	if len(running) == 0 {
		return "", fmt.Errorf("no running postgresql pod of release %q in %q (selector %s): is postgresql.enabled true and the StatefulSet up? (kubectl get pods -n %s -l %s)",
			names.Release, namespace, sel, namespace, sel)
	}
	sort.Strings(running) // <fullname>-postgresql-0 first
	return running[0], nil
}
