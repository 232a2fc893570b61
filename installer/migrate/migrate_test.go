package migrate

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sfake "k8s.io/client-go/kubernetes/fake"
)

const ns = "polyaxon"

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncBuf) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

func migrationJob(name string) *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{{Name: ContainerName, Image: "polyaxon/polyaxon-api:2.16.0"}},
		}}},
	}
}

// controller plays the Job controller: once the Job exists it adds a finished pod and sets the
// Job's terminal condition.
func controller(t *testing.T, cs *k8sfake.Clientset, name string, outcome batchv1.JobConditionType) {
	t.Helper()
	ctx := context.Background()
	go func() {
		for i := 0; i < 500; i++ {
			j, err := cs.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil || len(j.Status.Conditions) > 0 {
				time.Sleep(5 * time.Millisecond)
				continue
			}
			phase := corev1.PodSucceeded
			if outcome == batchv1.JobFailed {
				phase = corev1.PodFailed
			}
			_, _ = cs.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: name + "-abcde", Namespace: ns, Labels: map[string]string{"job-name": name}},
				Status:     corev1.PodStatus{Phase: phase},
			}, metav1.CreateOptions{})
			time.Sleep(20 * time.Millisecond)
			j.Status.Conditions = append(j.Status.Conditions, batchv1.JobCondition{
				Type: outcome, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", Message: "Job has reached the specified backoff limit"})
			_, _ = cs.BatchV1().Jobs(ns).UpdateStatus(ctx, j, metav1.UpdateOptions{})
			return
		}
	}()
}

func runner(cs *k8sfake.Clientset, out *syncBuf, opts ...Option) *Runner {
	return New(cs, ns, append([]Option{WithProgress(out), WithPollInterval(10 * time.Millisecond), WithTimeout(10 * time.Second)}, opts...)...)
}

func TestRunCompletesAndStreamsLogs(t *testing.T) {
	cs := k8sfake.NewClientset()
	out := &syncBuf{}
	name := JobName("polyaxon", "2.16.0")
	controller(t, cs, name, batchv1.JobComplete)
	res, err := runner(cs, out).Run(context.Background(), migrationJob(name))
	require.NoError(t, err)
	assert.False(t, res.Skipped)
	assert.Equal(t, "polyaxon-migrate-2-16-0", res.Job)
	// The fake clientset answers every log request with "fake logs".
	assert.Contains(t, out.String(), "polyaxon-migrate-2-16-0-abcde | fake logs")
	assert.Contains(t, out.String(), "completed")

	// A second run of the same version is skipped.
	res, err = runner(cs, out).Run(context.Background(), migrationJob(name))
	require.NoError(t, err)
	assert.True(t, res.Skipped)
}

func TestRunFailureReportsLastLines(t *testing.T) {
	cs := k8sfake.NewClientset()
	out := &syncBuf{}
	name := JobName("polyaxon", "2.16.0")
	controller(t, cs, name, batchv1.JobFailed)
	_, err := runner(cs, out).Run(context.Background(), migrationJob(name))
	var fe *FailedError
	require.ErrorAs(t, err, &fe)
	assert.Equal(t, []string{"fake logs"}, fe.LastLines)
	assert.Contains(t, err.Error(), "BackoffLimitExceeded")
	assert.Contains(t, err.Error(), "last 1 log lines:\n  fake logs")
	assert.Contains(t, err.Error(), "kubectl -n polyaxon logs job/polyaxon-migrate-2-16-0")

	// The failed Job is kept for inspection; the next run replaces it.
	_, err = cs.BatchV1().Jobs(ns).Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(t, err)
	require.NoError(t, cs.CoreV1().Pods(ns).Delete(context.Background(), name+"-abcde", metav1.DeleteOptions{}))
	controller(t, cs, name, batchv1.JobComplete)
	res, err := runner(cs, out).Run(context.Background(), migrationJob(name))
	require.NoError(t, err)
	assert.False(t, res.Skipped)
	assert.Contains(t, out.String(), "failed in an earlier run; replacing it")
}

func TestRunTimeoutDeletesJob(t *testing.T) {
	cs := k8sfake.NewClientset()
	out := &syncBuf{}
	name := JobName("polyaxon", "2.16.0")
	_, err := runner(cs, out, WithTimeout(100*time.Millisecond)).Run(context.Background(), migrationJob(name))
	var fe *FailedError
	require.ErrorAs(t, err, &fe)
	assert.Contains(t, err.Error(), "did not finish within 100ms")
	assert.Contains(t, err.Error(), "the Job and its pods were deleted")
	_, err = cs.BatchV1().Jobs(ns).Get(context.Background(), name, metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "a timed-out Job must not be left running")
}

func TestRunCancelledDeletesJob(t *testing.T) {
	cs := k8sfake.NewClientset()
	out := &syncBuf{}
	name := JobName("polyaxon", "2.16.0")
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	_, err := runner(cs, out).Run(ctx, migrationJob(name))
	require.ErrorIs(t, err, context.Canceled)
	assert.Contains(t, err.Error(), "interrupted")
	_, err = cs.BatchV1().Jobs(ns).Get(context.Background(), name, metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err))
}

func TestRunRefusesOtherNamespace(t *testing.T) {
	j := migrationJob("x")
	j.Namespace = "elsewhere"
	_, err := New(k8sfake.NewClientset(), ns).Run(context.Background(), j)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `not the release namespace "polyaxon"`)
}

func TestJobName(t *testing.T) {
	assert.Equal(t, "polyaxon-migrate-2-15-1", JobName("polyaxon", "2.15.1"))
	assert.Equal(t, "p-migrate-2-15-1-rc-1", JobName("p", "2.15.1-rc.1"))
	long := JobName(strings.Repeat("a", 60), "2.15.1")
	assert.LessOrEqual(t, len(long), 63)
	assert.False(t, strings.HasSuffix(long, "-"))
}

func TestDecodeJob(t *testing.T) {
	good := `---
# Source: polyaxon/templates/migrations/job.yaml
apiVersion: batch/v1
kind: Job
metadata:
  name: polyaxon-migrate-2-15-1
spec:
  template:
    spec:
      restartPolicy: Never
      containers:
        - name: migrate
          image: polyaxon/polyaxon-api:2.15.1
`
	j, err := DecodeJob([]byte(good))
	require.NoError(t, err)
	assert.Equal(t, "polyaxon-migrate-2-15-1", j.Name)

	_, err = DecodeJob([]byte(strings.Replace(good, "restartPolicy", "restartPolicyy", 1)))
	require.Error(t, err, "unknown fields fail")
	assert.Contains(t, err.Error(), "restartPolicyy")

	_, err = DecodeJob([]byte(strings.Replace(good, "name: migrate", "name: other", 1)))
	require.Error(t, err)
	assert.Contains(t, err.Error(), `no container named "migrate"`)

	_, err = DecodeJob([]byte("# Source: polyaxon/templates/migrations/job.yaml\n"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "migrations.renderJob=true")

	_, err = DecodeJob([]byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "want a batch/v1 Job")
}
