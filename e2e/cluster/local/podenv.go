package local

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/kubectl/pkg/util/fieldpath"
	"k8s.io/kubectl/pkg/util/resource"
)

// EnvVar is one variable of a container's environment.
type EnvVar struct{ Name, Value string }

// objectReader reads the ConfigMaps and Secrets a pod refers to (a clientset, or a fixed set in tests).
type objectReader interface {
	configMap(ctx context.Context, ns, name string) (map[string]string, error)
	secret(ctx context.Context, ns, name string) (map[string][]byte, error)
}

// apiReader reads them from the API server.
type apiReader struct{ cs kubernetes.Interface }

func (r apiReader) configMap(ctx context.Context, ns, name string) (map[string]string, error) {
	cm, err := r.cs.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	data := map[string]string{}
	for k, v := range cm.Data {
		data[k] = v
	}
	for k, v := range cm.BinaryData {
		data[k] = string(v)
	}
	return data, nil
}

func (r apiReader) secret(ctx context.Context, ns, name string) (map[string][]byte, error) {
	s, err := r.cs.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	data := map[string][]byte{}
	for k, v := range s.Data {
		data[k] = v
	}
	for k, v := range s.StringData {
		data[k] = []byte(v)
	}
	return data, nil
}

// ContainerEnv computes a container's environment as the kubelet does: `envFrom` sources in
// order (a key that is not a valid variable name is skipped, a prefix is prepended), then `env`
// in order, each `value` expanded with $(VAR) against what is defined before it, `valueFrom`
// read from ConfigMaps, Secrets, the pod's own fields and the container's resources. A later
// definition wins. A missing source is an error unless it is optional, as the kubelet refuses
// to start such a container.
//
// Left out, and said so in HostRewrites: Service links (`<SVC>_SERVICE_HOST` and the like) and
// `KUBERNETES_SERVICE_*`, whose cluster IPs a process on this machine cannot reach.
func ContainerEnv(ctx context.Context, cs kubernetes.Interface, pod *corev1.Pod, c *corev1.Container) ([]EnvVar, error) {
	return containerEnv(ctx, apiReader{cs}, pod, c)
}

func containerEnv(ctx context.Context, r objectReader, pod *corev1.Pod, c *corev1.Container) ([]EnvVar, error) {
	env := envList{}
	for _, from := range c.EnvFrom {
		switch {
		case from.ConfigMapRef != nil:
			data, err := r.configMap(ctx, pod.Namespace, from.ConfigMapRef.Name)
			if err != nil {
				if apierrors.IsNotFound(err) && optional(from.ConfigMapRef.Optional) {
					continue
				}
				return nil, fmt.Errorf("container %s: envFrom ConfigMap %s: %w", c.Name, from.ConfigMapRef.Name, err)
			}
			for _, k := range sortedKeys(data) {
				env.set(from.Prefix+k, data[k])
			}
		case from.SecretRef != nil:
			data, err := r.secret(ctx, pod.Namespace, from.SecretRef.Name)
			if err != nil {
				if apierrors.IsNotFound(err) && optional(from.SecretRef.Optional) {
					continue
				}
				return nil, fmt.Errorf("container %s: envFrom Secret %s: %w", c.Name, from.SecretRef.Name, err)
			}
			for _, k := range sortedKeys(data) {
				env.set(from.Prefix+k, string(data[k]))
			}
		}
	}
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			env.set(e.Name, ExpandVars(e.Value, env.lookup))
			continue
		}
		v, ok, err := valueFrom(ctx, r, pod, c, e)
		if err != nil {
			return nil, err
		}
		if ok {
			env.set(e.Name, v)
		}
	}
	return env.vars, nil
}

// valueFrom resolves one `valueFrom`; ok is false for a missing optional key.
func valueFrom(ctx context.Context, r objectReader, pod *corev1.Pod, c *corev1.Container, e corev1.EnvVar) (string, bool, error) {
	src := e.ValueFrom
	where := fmt.Sprintf("container %s: env %s", c.Name, e.Name)
	switch {
	case src.ConfigMapKeyRef != nil:
		ref := src.ConfigMapKeyRef
		data, err := r.configMap(ctx, pod.Namespace, ref.Name)
		if err != nil {
			if apierrors.IsNotFound(err) && optional(ref.Optional) {
				return "", false, nil
			}
			return "", false, fmt.Errorf("%s: ConfigMap %s: %w", where, ref.Name, err)
		}
		v, ok := data[ref.Key]
		if !ok && !optional(ref.Optional) {
			return "", false, fmt.Errorf("%s: ConfigMap %s has no key %s", where, ref.Name, ref.Key)
		}
		return v, ok, nil
	case src.SecretKeyRef != nil:
		ref := src.SecretKeyRef
		data, err := r.secret(ctx, pod.Namespace, ref.Name)
		if err != nil {
			if apierrors.IsNotFound(err) && optional(ref.Optional) {
				return "", false, nil
			}
			return "", false, fmt.Errorf("%s: Secret %s: %w", where, ref.Name, err)
		}
		v, ok := data[ref.Key]
		if !ok && !optional(ref.Optional) {
			return "", false, fmt.Errorf("%s: Secret %s has no key %s", where, ref.Name, ref.Key)
		}
		return string(v), ok, nil
	case src.FieldRef != nil:
		v, err := podField(pod, src.FieldRef.FieldPath)
		if err != nil {
			return "", false, fmt.Errorf("%s: %w", where, err)
		}
		return v, true, nil
	case src.ResourceFieldRef != nil:
		target := c
		if name := src.ResourceFieldRef.ContainerName; name != "" && name != c.Name {
			target = findContainer(pod, name)
			if target == nil {
				return "", false, fmt.Errorf("%s: resourceFieldRef names container %s, which the pod does not have", where, name)
			}
		}
		v, err := resource.ExtractContainerResourceValue(src.ResourceFieldRef, target)
		if err != nil {
			return "", false, fmt.Errorf("%s: %w", where, err)
		}
		return v, true, nil
	}
	return "", false, fmt.Errorf("%s: valueFrom names no source", where)
}

// podField is a downward-API field: the metadata ones as kubectl reads them, the rest from
// the pod's spec and status as the kubelet fills them.
func podField(pod *corev1.Pod, path string) (string, error) {
	switch path {
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.hostIP":
		return pod.Status.HostIP, nil
	case "status.podIP":
		return pod.Status.PodIP, nil
	case "status.hostIPs":
		ips := make([]string, 0, len(pod.Status.HostIPs))
		for _, ip := range pod.Status.HostIPs {
			ips = append(ips, ip.IP)
		}
		return strings.Join(ips, ","), nil
	case "status.podIPs":
		ips := make([]string, 0, len(pod.Status.PodIPs))
		for _, ip := range pod.Status.PodIPs {
			ips = append(ips, ip.IP)
		}
		return strings.Join(ips, ","), nil
	}
	return fieldpath.ExtractFieldPathAsString(pod, path)
}

func findContainer(pod *corev1.Pod, name string) *corev1.Container {
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == name {
			return &pod.Spec.Containers[i]
		}
	}
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == name {
			return &pod.Spec.InitContainers[i]
		}
	}
	return nil
}

func optional(b *bool) bool { return b != nil && *b }

// envList keeps the order of first definition; a later definition replaces the value.
type envList struct {
	vars  []EnvVar
	index map[string]int
}

func (l *envList) set(name, value string) {
	// The kubelet skips envFrom keys that are not valid variable names (and records an event).
	if len(validation.IsEnvVarName(name)) > 0 {
		return
	}
	if l.index == nil {
		l.index = map[string]int{}
	}
	if i, ok := l.index[name]; ok {
		l.vars[i].Value = value
		return
	}
	l.index[name] = len(l.vars)
	l.vars = append(l.vars, EnvVar{name, value})
}

func (l *envList) lookup(name string) (string, bool) {
	if i, ok := l.index[name]; ok {
		return l.vars[i].Value, true
	}
	return "", false
}

// ExpandVars expands $(NAME) references as the kubelet does in `env` values, `command` and
// `args`: a defined NAME is replaced by its value, an undefined one is left as written, and
// $$ stands for a literal $. (The kubelet's expansion lives in k8s.io/kubernetes, which no
// library module exports.)
func ExpandVars(s string, lookup func(string) (string, bool)) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteString(s[i:])
				return b.String()
			}
			name := s[i+2 : i+2+end]
			if v, ok := lookup(name); ok {
				b.WriteString(v)
			} else {
				b.WriteString(s[i : i+3+end])
			}
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}

func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}
