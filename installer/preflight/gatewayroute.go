package preflight

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/check"
)

const gatewayRouteFix = "install the Gateway API CRDs (standard channel) and a Gateway implementation, create the Gateway the values name with a listener whose allowedRoutes admit this namespace, or fix httpRoute.parentRefs"

var (
	httpRoutes = schema.GroupVersionResource{Group: gwv1.GroupName, Version: "v1", Resource: "httproutes"}
	gateways   = schema.GroupVersionResource{Group: gwv1.GroupName, Version: "v1", Resource: "gateways"}
)

// renderedRoute is the release's HTTPRoute, if it renders one.
func (e *Env) renderedRoute() (*gwv1.HTTPRoute, error) {
	for _, o := range e.objects() {
		if route, ok := o.(*gwv1.HTTPRoute); ok {
			return route, nil
		}
		u, ok := o.(*unstructured.Unstructured)
		if !ok || u.GetKind() != "HTTPRoute" {
			continue
		}
		var route gwv1.HTTPRoute
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &route); err != nil {
			return nil, fmt.Errorf("reading the rendered HTTPRoute: %w", err)
		}
		return &route, nil
	}
	return nil, nil
}

// checkGatewayRoute: before anything changes, the HTTPRoute can attach: Gateway API is served,
// each parent Gateway exists, and a listener of it (the named one) admits HTTPRoutes from
// this namespace.
func (e *Env) checkGatewayRoute(ctx context.Context) (string, error) {
	route, err := e.renderedRoute()
	if err != nil || route == nil {
		if err == nil {
			err = check.Skip("httpRoute is off")
		}
		return "", err
	}
	cs, err := e.clientset()
	if err != nil {
		return "", err
	}
	if _, err := cs.Discovery().ServerResourcesForGroupVersion(gwv1.GroupVersion.String()); err != nil {
		if apierrors.IsNotFound(err) {
			return "", fmt.Errorf("the API server does not serve %s (the Gateway API CRDs are not installed): httpRoute.enabled needs them and a Gateway implementation", gwv1.GroupVersion)
		}
		return "", fmt.Errorf("discovering %s: %w", gwv1.GroupVersion, err)
	}
	nsLabels, err := e.namespaceLabels(ctx, cs)
	if err != nil {
		return "", err
	}
	dyn, err := e.Clients.Dynamic()
	if err != nil {
		return "", err
	}
	var attached []string
	for _, ref := range route.Spec.ParentRefs {
		gwNS := string(deref(ref.Namespace, gwv1.Namespace(e.Namespace)))
		u, err := dyn.Resource(gateways).Namespace(gwNS).Get(ctx, string(ref.Name), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return "", fmt.Errorf("httpRoute.parentRefs: Gateway %s/%s not found: create it, or name an existing Gateway", gwNS, ref.Name)
		}
		if err != nil {
			return "", fmt.Errorf("reading Gateway %s/%s: %w", gwNS, ref.Name, err)
		}
		var gw gwv1.Gateway
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &gw); err != nil {
			return "", fmt.Errorf("reading Gateway %s/%s: %w", gwNS, ref.Name, err)
		}
		listener, why := admittingListener(gw, ref.SectionName, e.Namespace, nsLabels)
		if listener == "" {
			return "", fmt.Errorf("httpRoute.parentRefs: Gateway %s/%s %s", gwNS, ref.Name, why)
		}
		attached = append(attached, fmt.Sprintf("Gateway %s/%s listener %s", gwNS, ref.Name, listener))
	}
	return "the HTTPRoute can attach to " + strings.Join(attached, ", "), nil
}

// namespaceLabels are the release namespace's labels; a namespace the install creates has
// only its name.
func (e *Env) namespaceLabels(ctx context.Context, cs kubernetes.Interface) (labels.Set, error) {
	ns, err := cs.CoreV1().Namespaces().Get(ctx, e.Namespace, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return labels.Set{corev1.LabelMetadataName: e.Namespace}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading namespace %s: %w", e.Namespace, err)
	}
	return ns.Labels, nil
}

// admittingListener names the listener of gw (the one sectionName names, else any) that takes
// HTTPRoutes from namespace ns, or says why none does.
func admittingListener(gw gwv1.Gateway, sectionName *gwv1.SectionName, ns string, nsLabels labels.Set) (string, string) {
	var names, refusals []string
	for _, l := range gw.Spec.Listeners {
		names = append(names, string(l.Name))
		if sectionName != nil && l.Name != *sectionName {
			continue
		}
		if why := refusesRoutesFrom(l, gw.Namespace, ns, nsLabels); why != "" {
			refusals = append(refusals, fmt.Sprintf("listener %s %s", l.Name, why))
			continue
		}
		return string(l.Name), ""
	}
	if sectionName != nil && len(refusals) == 0 {
		return "", fmt.Sprintf("has no listener %s (its listeners: %s): set httpRoute.parentRefs[].sectionName to one of them", *sectionName, strings.Join(names, ", "))
	}
	return "", strings.Join(refusals, "; ") + ": let its listener's allowedRoutes admit namespace " + ns
}

// refusesRoutesFrom says why listener l of a Gateway in gwNS takes no HTTPRoute from ns.
func refusesRoutesFrom(l gwv1.Listener, gwNS, ns string, nsLabels labels.Set) string {
	if l.Protocol != gwv1.HTTPProtocolType && l.Protocol != gwv1.HTTPSProtocolType {
		return fmt.Sprintf("speaks %s, not HTTP or HTTPS", l.Protocol)
	}
	if l.AllowedRoutes != nil && len(l.AllowedRoutes.Kinds) > 0 {
		takes := false
		for _, k := range l.AllowedRoutes.Kinds {
			takes = takes || k.Kind == "HTTPRoute"
		}
		if !takes {
			return "takes no HTTPRoute (allowedRoutes.kinds)"
		}
	}
	from := gwv1.NamespacesFromSame
	var selector *metav1.LabelSelector
	if l.AllowedRoutes != nil && l.AllowedRoutes.Namespaces != nil {
		from = deref(l.AllowedRoutes.Namespaces.From, gwv1.NamespacesFromSame)
		selector = l.AllowedRoutes.Namespaces.Selector
	}
	switch from {
	case gwv1.NamespacesFromAll:
		return ""
	case gwv1.NamespacesFromSame:
		if gwNS == ns {
			return ""
		}
		return fmt.Sprintf("takes routes from its own namespace %s only (allowedRoutes.namespaces.from: Same)", gwNS)
	case gwv1.NamespacesFromSelector:
		if selector == nil {
			return "has allowedRoutes.namespaces.from: Selector without a selector"
		}
		sel, err := metav1.LabelSelectorAsSelector(selector)
		if err != nil {
			return fmt.Sprintf("has an invalid allowedRoutes selector: %v", err)
		}
		if sel.Matches(nsLabels) {
			return ""
		}
		return fmt.Sprintf("takes routes from namespaces matching %s, and %s does not", sel, ns)
	}
	return fmt.Sprintf("takes routes from %s namespaces", from)
}

func deref[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}

// checkGatewayRouteStatus: after install, the Gateway's controller has accepted the route on
// each parent and resolved its backend. Controllers write status asynchronously: it waits a
// little for them.
func (e *Env) checkGatewayRouteStatus(ctx context.Context) (string, error) {
	route, err := e.renderedRoute()
	if err != nil || route == nil {
		if err == nil {
			err = check.Skip("httpRoute is off")
		}
		return "", err
	}
	dyn, err := e.Clients.Dynamic()
	if err != nil {
		return "", err
	}
	var verdict string
	var verdictErr error
	_ = wait.PollUntilContextTimeout(ctx, 2*time.Second, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		u, err := dyn.Resource(httpRoutes).Namespace(e.Namespace).Get(ctx, route.Name, metav1.GetOptions{})
		if err != nil {
			verdictErr = fmt.Errorf("reading HTTPRoute %s: %w", route.Name, err)
			return false, nil
		}
		var live gwv1.HTTPRoute
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &live); err != nil {
			verdictErr = err
			return true, nil
		}
		verdict, verdictErr = routeVerdict(live, e.Namespace)
		var pending *pendingError
		return !errors.As(verdictErr, &pending), nil
	})
	var pending *pendingError
	if errors.As(verdictErr, &pending) {
		return "", check.Warn(pending)
	}
	return verdict, verdictErr
}

type pendingError struct{ msg string }

func (p *pendingError) Error() string { return p.msg }

// routeVerdict reads a route's status: every parent Accepted and ResolvedRefs, or why not.
func routeVerdict(route gwv1.HTTPRoute, ns string) (string, error) {
	var ok []string
	for _, ref := range route.Spec.ParentRefs {
		gwNS := deref(ref.Namespace, gwv1.Namespace(ns))
		name := fmt.Sprintf("Gateway %s/%s", gwNS, ref.Name)
		var status *gwv1.RouteParentStatus
		for i, p := range route.Status.Parents {
			if p.ParentRef.Name == ref.Name && deref(p.ParentRef.Namespace, gwv1.Namespace(ns)) == gwNS {
				status = &route.Status.Parents[i]
			}
		}
		if status == nil {
			return "", &pendingError{fmt.Sprintf("HTTPRoute %s has no status from %s yet: is its controller running? (kubectl -n %s describe httproute %s)", route.Name, name, ns, route.Name)}
		}
		for _, cond := range []string{string(gwv1.RouteConditionAccepted), string(gwv1.RouteConditionResolvedRefs)} {
			c := meta.FindStatusCondition(status.Conditions, cond)
			if c == nil {
				return "", &pendingError{fmt.Sprintf("HTTPRoute %s: %s (%s) has not set %s yet", route.Name, name, status.ControllerName, cond)}
			}
			if c.Status != metav1.ConditionTrue {
				return "", fmt.Errorf("HTTPRoute %s is not %s by %s (%s): %s: %s", route.Name, cond, name, status.ControllerName, c.Reason, c.Message)
			}
		}
		ok = append(ok, fmt.Sprintf("%s (%s)", name, status.ControllerName))
	}
	return fmt.Sprintf("HTTPRoute %s accepted, its backend resolved, by %s", route.Name, strings.Join(ok, ", ")), nil
}
