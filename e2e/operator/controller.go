package operator

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// Controller watches the custom resources and their children and reconciles each resource
// that changed, one at a time.
type Controller struct {
	Config      Config
	Log         *slog.Logger
	SyncTimeout time.Duration // how long the informers may take to list everything

	dyn      dynamic.Interface
	rec      *Reconciler
	reporter *Reporter
	queue    workqueue.TypedRateLimitingInterface[key]
}

// key names a custom resource by its kind.
type key struct{ Kind, Namespace, Name string }

// New is a controller for cfg on dyn. Run it once.
func New(cfg Config, dyn dynamic.Interface, log *slog.Logger) *Controller {
	c := &Controller{
		Config:      cfg,
		Log:         log,
		SyncTimeout: time.Minute,
		dyn:         dyn,
		reporter:    NewReporter(cfg, log),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[key](),
			workqueue.TypedRateLimitingQueueConfig[key]{Name: "polyaxon-operator"}),
	}
	c.rec = &Reconciler{Dyn: dyn, Config: cfg, Log: log, Report: c.reporter.Enqueue, Now: time.Now}
	return c
}

// Run watches until ctx is done, then stops its goroutines and returns nil. It returns an
// error when the informers cannot list what they watch (missing rights or CRDs).
func (c *Controller) Run(ctx context.Context) error {
	factory := dynamicinformer.NewFilteredDynamicSharedInformerFactory(c.dyn, 0, c.Config.WatchNamespace(), nil)
	defer factory.Shutdown() // waits for the informers, which the cancel below stops first
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	informers := map[schema.GroupVersionResource]cache.SharedIndexInformer{}
	for kind, gvr := range CustomResources {
		inf := factory.ForResource(gvr).Informer()
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { c.enqueue(kind, obj) },
			UpdateFunc: func(_, obj any) { c.enqueue(kind, obj) },
		}); err != nil {
			return err
		}
		informers[gvr] = inf
	}
	for _, b := range backends {
		if !c.Config.enabled(b) {
			continue
		}
		inf := factory.ForResource(b.GVR).Informer()
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    c.enqueueOwner,
			UpdateFunc: func(_, obj any) { c.enqueueOwner(obj) },
			DeleteFunc: c.enqueueOwner, // a child deleted under a running run fails it
		}); err != nil {
			return err
		}
		informers[b.GVR] = inf
	}
	// A run's pods: the scheduler's verdict on them changes no child's status.
	pods := factory.ForResource(podsGVR).Informer()
	if _, err := pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueueRun,
		UpdateFunc: func(_, obj any) { c.enqueueRun(obj) },
	}); err != nil {
		return err
	}
	informers[podsGVR] = pods
	factory.Start(ctx.Done())
	if err := c.waitForSync(ctx, informers); err != nil || ctx.Err() != nil {
		return err
	}
	ns := c.Config.WatchNamespace()
	if ns == metav1.NamespaceAll {
		ns = "all namespaces"
	}
	c.Log.Info("watching", "namespace", ns, "resources", names(informers), "reportStatuses", c.Config.SetAgent)

	var wg sync.WaitGroup
	if c.Config.SetAgent {
		wg.Go(func() { c.reporter.Run(ctx) })
	}
	wg.Go(func() {
		for c.processNext(ctx) {
		}
	})
	<-ctx.Done()
	c.queue.ShutDown()
	wg.Wait()
	c.Log.Info("stopped")
	return nil
}

// waitForSync waits for every informer's first list; the error names those that did not.
func (c *Controller) waitForSync(ctx context.Context, informers map[schema.GroupVersionResource]cache.SharedIndexInformer) error {
	syncCtx, cancel := context.WithTimeout(ctx, c.SyncTimeout)
	defer cancel()
	var synced []cache.InformerSynced
	for _, inf := range informers {
		synced = append(synced, inf.HasSynced)
	}
	if cache.WaitForCacheSync(syncCtx.Done(), synced...) || ctx.Err() != nil {
		return nil
	}
	var missing []string
	for gvr, inf := range informers {
		if !inf.HasSynced() {
			missing = append(missing, gvr.String())
		}
	}
	sort.Strings(missing)
	return fmt.Errorf("could not list %s within %s: does the operator's ServiceAccount have list and watch on them in %q, and are their CRDs installed?",
		strings.Join(missing, ", "), c.SyncTimeout, c.Config.WatchNamespace())
}

func (c *Controller) processNext(ctx context.Context) bool {
	k, quit := c.queue.Get()
	if quit {
		return false
	}
	defer c.queue.Done(k)
	err := c.rec.Reconcile(ctx, CustomResources[k.Kind], k.Namespace, k.Name)
	if err == nil || ctx.Err() != nil {
		c.queue.Forget(k)
		return true
	}
	c.Log.Warn("reconcile failed, retrying", "kind", k.Kind, "namespace", k.Namespace, "name", k.Name, "err", err)
	c.queue.AddRateLimited(k)
	return true
}

func (c *Controller) enqueue(kind string, obj any) {
	if m, err := meta(obj); err == nil {
		c.queue.Add(key{Kind: kind, Namespace: m.GetNamespace(), Name: m.GetName()})
	}
}

// enqueueRun queues the resources that may own a run's pod: Polyaxon names them
// plx-operation-<uuid> (the pod's app.kubernetes.io/instance), of a kind the pod does not say.
func (c *Controller) enqueueRun(obj any) {
	m, err := meta(obj)
	if err != nil {
		return
	}
	uuid := m.GetLabels()[labelInstance]
	if uuid == "" || m.GetLabels()["app.kubernetes.io/managed-by"] != "polyaxon" {
		return
	}
	for kind := range CustomResources {
		c.queue.Add(key{Kind: kind, Namespace: m.GetNamespace(), Name: "plx-operation-" + uuid})
	}
}

// enqueueOwner queues the polyaxon.com resource that controls obj, if any.
func (c *Controller) enqueueOwner(obj any) {
	m, err := meta(obj)
	if err != nil {
		return
	}
	ref := metav1.GetControllerOfNoCopy(m)
	if ref == nil || ref.APIVersion != APIVersion {
		return
	}
	if _, ok := CustomResources[ref.Kind]; ok {
		c.queue.Add(key{Kind: ref.Kind, Namespace: m.GetNamespace(), Name: ref.Name})
	}
}

// meta reads obj's metadata, including an object whose deletion the watch missed.
func meta(obj any) (metav1.Object, error) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	return apimeta.Accessor(obj)
}

func names(informers map[schema.GroupVersionResource]cache.SharedIndexInformer) string {
	var out []string
	for gvr := range informers {
		out = append(out, gvr.Resource+"."+gvr.Group)
	}
	sort.Strings(out)
	return strings.Join(out, ",")
}
