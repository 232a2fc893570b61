package release

import (
	"context"
	"fmt"
	"reflect"
	"time"

	"helm.sh/helm/v3/pkg/releaseutil"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
)

// statefulSetsByName decodes the StatefulSets of a release manifest.
func statefulSetsByName(manifest string) map[string]*appsv1.StatefulSet {
	out := map[string]*appsv1.StatefulSet{}
	dec := scheme.Codecs.UniversalDeserializer()
	for _, doc := range releaseutil.SplitManifests(manifest) {
		obj, _, err := dec.Decode([]byte(doc), nil, nil)
		if err != nil {
			continue
		}
		if s, ok := obj.(*appsv1.StatefulSet); ok {
			out[s.Name] = s
		}
	}
	return out
}

// recreateChangedStatefulSets deletes (foreground: pods first; volumes stay) the StatefulSets
// whose volume claim templates differ between the manifest Helm will patch from and the one it
// patches to. Kubernetes forbids changing claim templates in place, so Helm's patch would fail;
// a missing object is created by Helm instead. This is what rolling back across a Postgres
// major-version upgrade needs (the chart names the data volume after the major).
func (c *Client) recreateChangedStatefulSets(ctx context.Context, from, to string, timeout time.Duration) error {
	old, next := statefulSetsByName(from), statefulSetsByName(to)
	api := c.kube.AppsV1().StatefulSets(c.namespace)
	for name, n := range next {
		o, ok := old[name]
		if !ok || reflect.DeepEqual(o.Spec.VolumeClaimTemplates, n.Spec.VolumeClaimTemplates) {
			continue
		}
		err := api.Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationForeground)})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("deleting StatefulSet %s/%s: %w", c.namespace, name, err)
		}
		c.progress("StatefulSet %s changes its volume claim templates: deleted it (its volumes are kept) so that Helm recreates it", name)
		err = wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
			_, err := api.Get(ctx, name, metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
		if err != nil {
			return fmt.Errorf("waiting for StatefulSet %s/%s to be deleted: %w", c.namespace, name, err)
		}
	}
	return nil
}
