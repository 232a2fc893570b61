package preflight

import (
	"context"
	"fmt"
	"path"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/backup"
)

// The gateway's proxy (issue 52): nginx in front of haupt, haupt on the pod's loopback. The
// chart renders it so (templates/gateway/deployment.yaml); this reads the live objects, which
// an edit, a `helm upgrade` of another chart or a GitOps tool may have changed since.

const (
	gatewayComponent = "gateway"
	// haupt's address: the loopback of the gateway's pod, which no other pod reaches.
	hauptHost       = "127.0.0.1"
	gatewayProxyFix = "the gateway's pod runs nginx (the `proxy` container, with its ConfigMap) on the port its Service targets, and haupt's API and streams on 127.0.0.1 only: undo the change named (kubectl -n NAMESPACE edit deployment,service -l app.kubernetes.io/component=gateway), or run `polyaxon-deploy upgrade`, which applies the chart's Deployment and Service again (a container added by hand stays: remove it)"
)

// checkGatewayProxy reads the release's live gateway Deployment and Service and fails when
// nginx is not what the Service reaches, or haupt listens beyond the pod's loopback (where
// other pods, runs among them, would reach it past nginx).
func (e *Env) checkGatewayProxy(ctx context.Context) (string, error) {
	cs, err := e.clientset()
	if err != nil {
		return "", err
	}
	// The deployed revision's own chart says which labels its gateway carries.
	rel, err := backup.LoadRelease(ctx, cs, e.Namespace, e.Release)
	if err != nil {
		return "", err
	}
	sel := metav1.ListOptions{LabelSelector: rel.Names.ComponentSelector(gatewayComponent)}
	deps, err := cs.AppsV1().Deployments(e.Namespace).List(ctx, sel)
	if err != nil {
		return "", fmt.Errorf("listing the gateway's Deployments: %w", err)
	}
	if len(deps.Items) == 0 {
		return "", fmt.Errorf("no Deployment of release %s in %s has the gateway's labels (%s)", e.Release, e.Namespace, sel.LabelSelector)
	}
	svcs, err := cs.CoreV1().Services(e.Namespace).List(ctx, sel)
	if err != nil {
		return "", fmt.Errorf("listing the gateway's Services: %w", err)
	}
	var problems, names []string
	for _, d := range deps.Items {
		names = append(names, d.Name)
		var svc *corev1.Service
		for i, s := range svcs.Items {
			if len(s.Spec.Selector) > 0 && labels.SelectorFromSet(s.Spec.Selector).Matches(labels.Set(d.Spec.Template.Labels)) {
				svc = &svcs.Items[i]
				break
			}
		}
		problems = append(problems, gatewayProxyProblems(&d, svc)...)
	}
	if len(problems) > 0 {
		return "", joinErrs(problems, 10)
	}
	return fmt.Sprintf("Deployment %s: nginx on the Service's port, haupt on %s", strings.Join(names, ", "), hauptHost), nil
}

// gatewayProxyProblems says what keeps d's pod from being nginx in front of haupt, each naming
// the object: no container runs nginx, or it mounts no ConfigMap (its configuration); a
// container runs haupt (python -c) on an address other than the loopback; a container other
// than nginx declares the port svc targets; svc targets a port nginx does not declare. svc is
// the Service that selects d's pods (nil: none does).
func gatewayProxyProblems(d *appsv1.Deployment, svc *corev1.Service) []string {
	spec := d.Spec.Template.Spec
	var out []string
	fail := func(format string, args ...any) {
		out = append(out, fmt.Sprintf("Deployment %s: ", d.Name)+fmt.Sprintf(format, args...))
	}
	var proxy *corev1.Container
	for i, c := range spec.Containers {
		if proxy == nil && len(c.Command) > 0 && path.Base(c.Command[0]) == "nginx" {
			proxy = &spec.Containers[i]
			continue
		}
		if host, ok := hauptAddress(c); ok && host != hauptHost {
			if host == "" {
				fail("container %q runs haupt (python -c) with no address to listen on, where the chart passes %s: haupt must listen on the pod's loopback only", c.Name, hauptHost)
			} else {
				fail("container %q runs haupt (python -c) on %s, not %s: its port is reachable from other pods, runs among them, past nginx", c.Name, host, hauptHost)
			}
		}
	}
	if proxy == nil {
		fail("no container runs nginx (a command starting with nginx): nothing checks requests before haupt")
	} else if !mountsConfigMap(spec, *proxy) {
		fail("the nginx container %q mounts no ConfigMap: it runs without the chart's nginx.conf (the gateway-proxy ConfigMap)", proxy.Name)
	}
	if svc == nil {
		fail("no Service of the gateway selects its pods")
		return out
	}
	for _, sp := range svc.Spec.Ports {
		target := sp.TargetPort
		if target.Type == intstr.Int && target.IntVal == 0 {
			target = intstr.FromInt32(sp.Port) // an unset targetPort is the port itself
		}
		port := portName(sp)
		var others []string
		for _, c := range spec.Containers {
			if (proxy == nil || c.Name != proxy.Name) && declares(c, target, sp.Protocol) {
				others = append(others, strconv.Quote(c.Name))
			}
		}
		if len(others) > 0 {
			out = append(out, fmt.Sprintf("Service %s: port %s targets %s, which container %s of Deployment %s declares: the Service reaches it without nginx",
				svc.Name, port, targetString(target), strings.Join(others, ", "), d.Name))
			continue
		}
		if proxy != nil && !declares(*proxy, target, sp.Protocol) {
			out = append(out, fmt.Sprintf("Service %s: port %s targets %s, which the nginx container %q of Deployment %s does not declare: the Service does not reach nginx",
				svc.Name, port, targetString(target), proxy.Name, d.Name))
		}
	}
	return out
}

// hauptAddress is the address a container that runs haupt (python -c SCRIPT HOST PORT, as the
// chart starts haupt's API and streams) passes to its script: the first argument after the
// script, whether written in command or args. ok is false for any other container.
func hauptAddress(c corev1.Container) (host string, ok bool) {
	if len(c.Command) == 0 || !strings.HasPrefix(path.Base(c.Command[0]), "python") {
		return "", false
	}
	argv := append(append([]string(nil), c.Command...), c.Args...)
	for i, a := range argv[1:] {
		if a != "-c" {
			continue
		}
		if rest := argv[i+2:]; len(rest) > 1 {
			return rest[1], true
		}
		return "", true
	}
	return "", false
}

// mountsConfigMap reports whether c mounts a volume of spec that holds a ConfigMap.
func mountsConfigMap(spec corev1.PodSpec, c corev1.Container) bool {
	for _, m := range c.VolumeMounts {
		for _, v := range spec.Volumes {
			if v.Name != m.Name {
				continue
			}
			if v.ConfigMap != nil {
				return true
			}
			if v.Projected != nil {
				for _, s := range v.Projected.Sources {
					if s.ConfigMap != nil {
						return true
					}
				}
			}
		}
	}
	return false
}

// declares reports whether c declares the port a Service's targetPort names (by name) or
// numbers, with the Service port's protocol (TCP when unset, as the API server defaults it).
func declares(c corev1.Container, target intstr.IntOrString, protocol corev1.Protocol) bool {
	for _, p := range c.Ports {
		if orTCP(p.Protocol) != orTCP(protocol) {
			continue
		}
		if (target.Type == intstr.String && p.Name == target.StrVal) || (target.Type == intstr.Int && p.ContainerPort == target.IntVal) {
			return true
		}
	}
	return false
}

func orTCP(p corev1.Protocol) corev1.Protocol {
	if p == "" {
		return corev1.ProtocolTCP
	}
	return p
}

func portName(sp corev1.ServicePort) string {
	if sp.Name != "" {
		return strconv.Quote(sp.Name)
	}
	return strconv.Itoa(int(sp.Port))
}

func targetString(t intstr.IntOrString) string {
	if t.Type == intstr.String {
		return "port " + strconv.Quote(t.StrVal)
	}
	return "port " + strconv.Itoa(int(t.IntVal))
}
