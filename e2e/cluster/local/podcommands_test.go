package local

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster"
)

const podCommandsNamespace = "pod-commands"

// podCommandsExec answers exec into the migrate containers of podCommandsNamespace on this
// machine, with OUT set to a directory of the test's work dir.
func podCommandsExec(workDir string) ClusterExec {
	return ClusterExec{Name: "pod-commands", Namespaces: []string{podCommandsNamespace}, Containers: []string{MigrationContainer},
		Env: map[string]string{"OUT": filepath.Join(workDir, "pod-commands")}}
}

// A Job's pod annotated RunAnnotation runs its script on this machine, through exec, and ends
// by the script's exit code: the Job completes or fails accordingly. A pod whose container no
// ClusterExec answers fails with the reason; a pod without the annotation completes as kwok
// completes every Job's pod.
func TestLocalPodCommands(t *testing.T) {
	c := sharedCluster(t)
	ctx := context.Background()
	ns := namespace(t, c, podCommandsNamespace)
	out := filepath.Join(shared.workDir, "pod-commands")
	require.NoError(t, os.MkdirAll(out, 0o755))

	job := func(name, container string, ann map[string]string) *batchv1.Job {
		return &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: batchv1.JobSpec{
				BackoffLimit: ptr.To(int32(0)),
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Annotations: ann},
					Spec: corev1.PodSpec{
						RestartPolicy: corev1.RestartPolicyNever,
						NodeSelector:  map[string]string{cluster.PoolLabel: cluster.PoolCore},
						Containers:    []corev1.Container{{Name: container, Image: "polyaxon/polyaxon-api:2.15.1"}},
					},
				},
			},
		}
	}
	cases := []struct {
		job  *batchv1.Job
		want batchv1.JobConditionType
		code int32
		msg  string
	}{
		{job("writes", MigrationContainer, map[string]string{RunAnnotation: `sleep 1; echo migrated > "$OUT/writes"; echo done`}), batchv1.JobComplete, 0, "done"},
		{job("fails", MigrationContainer, map[string]string{RunAnnotation: `echo half > "$OUT/fails"; echo boom >&2; exit 3`}), batchv1.JobFailed, 3, "boom"},
		{job("no-exec", "other", map[string]string{RunAnnotation: `true`}), batchv1.JobFailed, 128, "the command could not run"},
		{job("plain", MigrationContainer, nil), batchv1.JobComplete, 0, ""},
	}
	for _, tc := range cases {
		_, err := c.Clientset.BatchV1().Jobs(ns).Create(ctx, tc.job, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	for _, tc := range cases {
		name := tc.job.Name
		waitFor(t, time.Minute, "job "+name+" "+string(tc.want), func(ctx context.Context) (bool, error) {
			j, err := c.Clientset.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			for _, cond := range j.Status.Conditions {
				if cond.Status == corev1.ConditionTrue && (cond.Type == batchv1.JobComplete || cond.Type == batchv1.JobFailed) {
					if cond.Type != tc.want {
						return false, fmt.Errorf("job %s ended %s, want %s", name, cond.Type, tc.want)
					}
					return true, nil
				}
			}
			return false, nil
		})
		pods, err := c.Clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "job-name=" + name})
		require.NoError(t, err)
		require.Len(t, pods.Items, 1, name)
		term := pods.Items[0].Status.ContainerStatuses[0].State.Terminated
		require.NotNil(t, term, name)
		assert.Equal(t, tc.code, term.ExitCode, name)
		assert.Contains(t, term.Message, tc.msg, name)
	}
	b, err := os.ReadFile(filepath.Join(out, "writes"))
	require.NoError(t, err, "the script ran on this machine")
	assert.Equal(t, "migrated\n", string(b))
	b, err = os.ReadFile(filepath.Join(out, "fails"))
	require.NoError(t, err)
	assert.Equal(t, "half\n", string(b), "a failing script's writes happened before it failed")
}

func TestExitCode(t *testing.T) {
	assert.Equal(t, 0, ExitCode(nil))
	assert.Equal(t, 3, ExitCode(fmt.Errorf(`exec ["sh" "-c" "x"] in ns/p: command terminated: error executing command: exit status 3`)))
	assert.Equal(t, -1, ExitCode(fmt.Errorf("no exec found for container")))
}
