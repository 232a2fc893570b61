package upgrade

import (
	"context"
	"fmt"
	"time"

	"helm.sh/helm/v3/pkg/releaseutil"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/readiness"
)

// PostgresMajorAnnotation marks the chart's Postgres StatefulSet with its major version; the
// chart names the data volume after it (data-pg<major>), so a new major starts on a new, empty
// volume and the old data directory is never opened by the new server.
const PostgresMajorAnnotation = "polyaxon-deploy/postgres-major"

// postgresStatefulSet finds the chart's Postgres StatefulSet in a release manifest.
func postgresStatefulSet(manifest string) (*appsv1.StatefulSet, error) {
	dec := scheme.Codecs.UniversalDeserializer()
	for name, doc := range releaseutil.SplitManifests(manifest) {
		obj, gvk, err := dec.Decode([]byte(doc), nil, nil)
		if err != nil || gvk.Kind != "StatefulSet" {
			continue
		}
		sts, ok := obj.(*appsv1.StatefulSet)
		if !ok {
			return nil, fmt.Errorf("manifest %s: StatefulSet did not decode as apps/v1", name)
		}
		if _, ok := sts.Annotations[PostgresMajorAnnotation]; ok || sts.Labels["app.kubernetes.io/component"] == "postgresql" {
			return sts, nil
		}
	}
	return nil, fmt.Errorf("no Postgres StatefulSet (annotation %s) in the release manifest", PostgresMajorAnnotation)
}

// statefulSets switches the Postgres StatefulSet outside Helm: the claim template name changes
// with the major version and Kubernetes forbids changing it in place, so the old StatefulSet is
// deleted (its volume stays) and the new one created; before Helm applies the release the
// object is deleted again with its pods orphaned, and Helm creates it and adopts the pod.
type statefulSets struct {
	kube      kubernetes.Interface
	namespace string
	release   string
	timeout   time.Duration
	poll      time.Duration
	// say gets what a wait waits for, at least every readiness.DefaultEvery (nil: silent).
	say func(string)
}

// remove deletes the StatefulSet name and waits until it and (foreground propagation) its pods
// are gone; the volumes stay.
func (s *statefulSets) remove(ctx context.Context, name string) error {
	return s.delete(ctx, name, metav1.DeletePropagationForeground)
}

// orphan deletes the StatefulSet name but leaves its pods running, so that Helm creates it
// afresh (rather than patching a claim template Kubernetes will not let it change) and the new
// object adopts the running pod.
func (s *statefulSets) orphan(ctx context.Context, name string) error {
	return s.delete(ctx, name, metav1.DeletePropagationOrphan)
}

func (s *statefulSets) delete(ctx context.Context, name string, policy metav1.DeletionPropagation) error {
	api := s.kube.AppsV1().StatefulSets(s.namespace)
	err := api.Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: ptr.To(policy)})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting StatefulSet %s/%s: %w", s.namespace, name, err)
	}
	sayer := readiness.NewSayer(s.say, fmt.Sprintf("waiting for StatefulSet %s to be deleted", name), s.timeout)
	err = wait.PollUntilContextTimeout(ctx, s.poll, s.timeout, true, func(ctx context.Context) (bool, error) {
		_, err := api.Get(ctx, name, metav1.GetOptions{})
		if gone := apierrors.IsNotFound(err); !gone {
			sayer.Tick("still there")
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for StatefulSet %s/%s to be deleted: %w", s.namespace, name, err)
	}
	return nil
}

// create creates want, owned by the release, and waits until it is ready.
func (s *statefulSets) create(ctx context.Context, want *appsv1.StatefulSet) error {
	api := s.kube.AppsV1().StatefulSets(s.namespace)
	obj := want.DeepCopy()
	obj.Namespace = s.namespace
	obj.ResourceVersion = ""
	if obj.Annotations == nil {
		obj.Annotations = map[string]string{}
	}
	// Helm's ownership marks, so Helm may take the object over.
	obj.Annotations["meta.helm.sh/release-name"] = s.release
	obj.Annotations["meta.helm.sh/release-namespace"] = s.namespace
	if obj.Labels == nil {
		obj.Labels = map[string]string{}
	}
	obj.Labels["app.kubernetes.io/managed-by"] = "Helm"
	if _, err := api.Create(ctx, obj, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating StatefulSet %s/%s: %w", s.namespace, want.Name, err)
	}
	waiter := readiness.Waiter{Kube: s.kube, Namespace: s.namespace, Poll: s.poll}
	if s.say != nil {
		waiter.Report = func(waited time.Duration, notReady []readiness.State) {
			s.say(fmt.Sprintf("waiting for the new Postgres (%s of %s): %s", waited.Round(time.Second), s.timeout, readiness.Describe(notReady)))
		}
	}
	return waiter.Wait(ctx, s.timeout, readiness.Workload{Kind: "StatefulSet", Name: want.Name})
}
