package backup

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/render"
)

// ClientPodSpec describes the short-lived pod that reaches a database over the network from
// inside the cluster: an external one, or a CloudNativePG Cluster's primary.
type ClientPodSpec struct {
	Namespace string
	// Names name the Job and label it as the release's.
	Names        render.Names
	DB           DBSettings
	NodeSelector map[string]string
	Tolerations  []corev1.Toleration
	// Lifetime: the pod sleeps this long then exits by itself, so a crashed
	// polyaxon-deploy leaves nothing running for long (default 2h).
	Lifetime time.Duration
	// StartTimeout bounds waiting for the pod to run (default 3m).
	StartTimeout time.Duration
}

// ClientPodComponent is the component label of the client pod's Job.
const ClientPodComponent = "db-client"

// ClientJob builds the Job: a postgres image sleeping, with the database
// connection in its environment and the password from the Secret.
func ClientJob(spec ClientPodSpec, name string) *batchv1.Job {
	lifetime := spec.Lifetime
	if lifetime == 0 {
		lifetime = 2 * time.Hour
	}
	labels := maps.Clone(spec.Names.Selector)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[LabelComponent] = ClientPodComponent
	labels["app.kubernetes.io/managed-by"] = "polyaxon-deploy"
	env := []corev1.EnvVar{
		{Name: "PGHOST", Value: spec.DB.Host},
		{Name: "PGPORT", Value: strconv.Itoa(spec.DB.Port)},
		{Name: "POSTGRES_USER", Value: spec.DB.User},
		{Name: "POSTGRES_DB", Value: spec.DB.Database},
		{Name: "POSTGRES_PASSWORD", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: spec.DB.SecretName},
			Key:                  spec.DB.SecretKey,
		}}},
		{Name: "PGCONNECT_TIMEOUT", Value: "30"},
	}
	if spec.DB.SSLMode != "" {
		env = append(env, corev1.EnvVar{Name: "PGSSLMODE", Value: spec.DB.SSLMode})
	}
	secs := int64(lifetime.Seconds())
	ttl := int32(300)
	backoff := int32(0)
	grace := int64(1)
	yes, no := true, false
	uid := cmp.Or(spec.DB.ClientUID, 999) // the postgres user of the image (the official one's: 999)
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: spec.Namespace, Labels: labels},
		Spec: batchv1.JobSpec{
			BackoffLimit:            &backoff,
			ActiveDeadlineSeconds:   &secs,
			TTLSecondsAfterFinished: &ttl,
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					RestartPolicy:                 corev1.RestartPolicyNever,
					TerminationGracePeriodSeconds: &grace,
					AutomountServiceAccountToken:  &no,
					NodeSelector:                  spec.NodeSelector,
					Tolerations:                   spec.Tolerations,
					SecurityContext: &corev1.PodSecurityContext{
						RunAsNonRoot:   &yes,
						RunAsUser:      &uid,
						RunAsGroup:     &uid,
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
					},
					Containers: []corev1.Container{{
						Name:    PostgresContainer,
						Image:   spec.DB.ClientImage,
						Command: []string{"sleep", strconv.FormatInt(secs, 10)},
						Env:     env,
						SecurityContext: &corev1.SecurityContext{
							AllowPrivilegeEscalation: &no,
							Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
						},
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
							corev1.ResourceCPU:    resource.MustParse("100m"),
							corev1.ResourceMemory: resource.MustParse("64Mi"),
						}},
					}},
				},
			},
		},
	}
}

// StartClientPod creates the client Job, waits for its pod to run and
// returns a target exec'ing into it; cleanup deletes the Job and its pod.
func StartClientPod(ctx context.Context, k Kube, spec ClientPodSpec) (Target, func(context.Context) error, error) {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	name := spec.Names.Fullname + "-db-client-" + hex.EncodeToString(b)
	if len(name) > 63 {
		name = name[len(name)-63:]
		name = strings.TrimLeft(name, "-")
	}
	jobs := k.Client.BatchV1().Jobs(spec.Namespace)
	if _, err := jobs.Create(ctx, ClientJob(spec, name), metav1.CreateOptions{}); err != nil {
		return nil, nil, fmt.Errorf("creating database client Job %s/%s: %w", spec.Namespace, name, err)
	}
	cleanup := func(ctx context.Context) error {
		bg := metav1.DeletePropagationBackground
		err := jobs.Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: &bg})
		if err != nil && !isNotFound(err) {
			return fmt.Errorf("deleting database client Job %s/%s: %w", spec.Namespace, name, err)
		}
		return nil
	}
	timeout := spec.StartTimeout
	if timeout == 0 {
		timeout = 3 * time.Minute
	}
	var pod, why string
	err := wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		pods, err := k.Client.CoreV1().Pods(spec.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "job-name=" + name})
		if err != nil {
			why = err.Error()
			return false, nil
		}
		for _, p := range pods.Items {
			switch p.Status.Phase {
			case corev1.PodRunning:
				pod = p.Name
				return true, nil
			case corev1.PodFailed, corev1.PodSucceeded:
				return false, fmt.Errorf("pod %s ended (%s) %s", p.Name, p.Status.Phase, p.Status.Message)
			}
			why = podWaitReason(&p)
		}
		return false, nil
	})
	if err != nil {
		cerr := cleanup(context.WithoutCancel(ctx))
		if why != "" {
			err = fmt.Errorf("%w (last seen: %s)", err, why)
		}
		if cerr != nil {
			err = fmt.Errorf("%w; %w", err, cerr)
		}
		return nil, nil, fmt.Errorf("database client pod of Job %s/%s did not start: %w", spec.Namespace, name, err)
	}
	source := SourceExternal
	if spec.DB.InCluster {
		source = SourceInCluster // a CloudNativePG Cluster of the chart's
	}
	return NewPodTarget(k.execer(), spec.Namespace, pod, PostgresContainer, source), cleanup, nil
}

func podWaitReason(p *corev1.Pod) string {
	for _, c := range p.Status.ContainerStatuses {
		if c.State.Waiting != nil && c.State.Waiting.Reason != "" {
			return fmt.Sprintf("pod %s container %s waiting: %s %s", p.Name, c.Name, c.State.Waiting.Reason, c.State.Waiting.Message)
		}
	}
	for _, c := range p.Status.Conditions {
		if c.Status == corev1.ConditionFalse && c.Message != "" {
			return fmt.Sprintf("pod %s %s: %s", p.Name, c.Type, c.Message)
		}
	}
	return fmt.Sprintf("pod %s phase %s", p.Name, p.Status.Phase)
}
