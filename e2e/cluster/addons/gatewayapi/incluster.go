package gatewayapi

import (
	"context"
	"fmt"
	"os"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster"
)

// gatewayInClusterPort is the HTTPS listener's port in the cluster: the Gateway's listener
// port, Traefik's entry point and its Service's port (unprivileged: Traefik runs as nobody).
const gatewayInClusterPort = 8443

// StartInCluster runs Traefik in the cluster (kind: real pods and a CNI), as platform
// teams run a Gateway's data plane: the Gateway of Start (a CA and a certificate for
// opts.Hostnames, a GatewayClass of Traefik's controller, one HTTPS listener taking routes from
// every namespace), and Traefik from image as a Deployment in the Gateway's namespace, with the
// rights its Kubernetes Gateway provider needs and a Service "traefik" on the listener's port.
// It returns once the Gateway is Programmed. Address is left empty: reach the Service as the
// cluster allows (a port-forward). The CRDs must be installed (InstallCRDs).
func StartInCluster(ctx context.Context, c *cluster.Cluster, image string, opts Options) (*Gateway, error) {
	g := newGateway(opts)
	dir := opts.Dir
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "gateway-"); err != nil {
			return nil, err
		}
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	dyn, err := applyGateway(ctx, c, g, opts.Hostnames, gatewayInClusterPort, dir)
	if err != nil {
		return nil, err
	}
	cs := c.Clientset
	const name = "traefik"
	labels := map[string]string{"app.kubernetes.io/name": name}
	svc, err := cs.CoreV1().Services(g.Namespace).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{
			Name: g.Listener, Port: gatewayInClusterPort, TargetPort: intstr.FromInt32(gatewayInClusterPort),
		}}},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("traefik Service: %w", err)
	}
	if err := createTraefikRBAC(ctx, c, g.Namespace, name); err != nil {
		return nil, err
	}
	replicas := int32(1)
	no, yes := false, true
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					ServiceAccountName: name,
					NodeSelector:       opts.NodeSelector,
					SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: &yes, RunAsUser: new(int64(65534)),
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
					Containers: []corev1.Container{{
						Name: name, Image: image, ImagePullPolicy: corev1.PullNever,
						Args:  traefikArgs(g.Listener, fmt.Sprintf(":%d", gatewayInClusterPort), ":9000", svc.Spec.ClusterIP),
						Ports: []corev1.ContainerPort{{Name: g.Listener, ContainerPort: gatewayInClusterPort}},
						ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
							Path: "/ping", Port: intstr.FromInt32(9000)}}, PeriodSeconds: 2},
						SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: &no, ReadOnlyRootFilesystem: &yes,
							Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
					}},
				},
			},
		},
	}
	if _, err := cs.AppsV1().Deployments(g.Namespace).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("traefik Deployment: %w", err)
	}
	last := "not started"
	err = wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		d, err := cs.AppsV1().Deployments(g.Namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if d.Status.ReadyReplicas < 1 {
			last = fmt.Sprintf("Deployment %s/%s: %d of 1 replica ready", g.Namespace, name, d.Status.ReadyReplicas)
			return false, nil
		}
		ok, why, err := gatewayProgrammed(ctx, dyn, g)
		last = why
		return ok, err
	})
	if err != nil && ctx.Err() != nil {
		return nil, fmt.Errorf("traefik in the cluster: %s", last)
	}
	return g, err
}

// createTraefikRBAC gives Traefik's Kubernetes Gateway provider what it reads (Gateway API
// objects, Services, their EndpointSlices, the listeners' Secrets, namespaces) and the status
// it writes, cluster-wide: routes may come from every namespace.
func createTraefikRBAC(ctx context.Context, c *cluster.Cluster, ns, name string) error {
	read := []string{"get", "list", "watch"}
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + name},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"namespaces", "services", "secrets", "configmaps"}, Verbs: read},
			{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: read},
			{APIGroups: []string{"gateway.networking.k8s.io"}, Resources: []string{"*"}, Verbs: read},
			{APIGroups: []string{"gateway.networking.k8s.io"}, Resources: []string{"*/status"}, Verbs: []string{"update", "patch"}},
		},
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}},
	}
	cs := c.Clientset
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("traefik ServiceAccount: %w", err)
	}
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("traefik ClusterRole: %w", err)
	}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("traefik ClusterRoleBinding: %w", err)
	}
	return nil
}
