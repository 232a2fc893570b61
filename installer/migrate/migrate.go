// Package migrate runs Polyaxon's database migrations as a Job that the installer creates and
// waits on itself, before Helm rolls the new version out. (A Helm post-install hook combined with
// --wait deadlocks: the hook waits for the release, the release for the migrated database.)
//
// The chart renders the Job (templates/migrations/job.yaml with migrations.renderJob=true); the
// caller renders that single template and hands the Job to Runner.Run, which creates it (or skips
// it when a Job of that name already completed), streams its logs to the progress writer, waits
// for Complete or Failed, and never leaves it running.
package migrate

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/readiness"
)

// ContainerName is the migration container in the chart's Job.
const ContainerName = "migrate"

// JobName is the chart's name for the migration Job of appVersion: <release>-migrate-<version
// with dots as dashes>, cut to the 63 characters a label value (job-name) allows.
func JobName(release, appVersion string) string {
	v := strings.ToLower(strings.NewReplacer(".", "-", "+", "-", "_", "-").Replace(appVersion))
	name := release + "-migrate-" + v
	if len(name) > 63 {
		name = strings.TrimRight(name[:63], "-")
	}
	return name
}

// DecodeJob decodes the rendered migration template strictly (unknown fields fail) and checks
// that it is one batch/v1 Job with a migrate container.
func DecodeJob(manifest []byte) (*batchv1.Job, error) {
	var docs [][]byte
	for _, d := range bytes.Split(manifest, []byte("\n---")) {
		if len(bytes.TrimSpace(stripComments(d))) > 0 {
			docs = append(docs, d)
		}
	}
	if len(docs) != 1 {
		return nil, fmt.Errorf("migration template: want exactly one object, got %d (is migrations.renderJob=true set for the render?)", len(docs))
	}
	codecs := serializer.NewCodecFactory(scheme.Scheme, serializer.EnableStrict)
	obj, gvk, err := codecs.UniversalDeserializer().Decode(docs[0], nil, nil)
	if err != nil {
		return nil, fmt.Errorf("migration template: %w", err)
	}
	job, ok := obj.(*batchv1.Job)
	if !ok {
		return nil, fmt.Errorf("migration template: want a batch/v1 Job, got %s", gvk)
	}
	found := false
	for _, c := range job.Spec.Template.Spec.Containers {
		found = found || c.Name == ContainerName
	}
	if !found {
		return nil, fmt.Errorf("migration Job %s: no container named %q", job.Name, ContainerName)
	}
	return job, nil
}

func stripComments(b []byte) []byte {
	var out []byte
	for _, line := range bytes.Split(b, []byte("\n")) {
		t := bytes.TrimSpace(line)
		if bytes.HasPrefix(t, []byte("#")) || bytes.Equal(t, []byte("---")) {
			continue
		}
		out = append(out, line...)
		out = append(out, '\n')
	}
	return out
}

// Runner creates and watches migration Jobs in one namespace.
type Runner struct {
	kube      kubernetes.Interface
	namespace string
	out       io.Writer
	timeout   time.Duration
	poll      time.Duration
	tail      int
}

// Option configures a Runner.
type Option func(*Runner)

// WithProgress sets where the Job's log lines and status lines go.
func WithProgress(w io.Writer) Option { return func(r *Runner) { r.out = w } }

// WithTimeout bounds the wait for the Job (default 10 minutes).
func WithTimeout(d time.Duration) Option {
	return func(r *Runner) {
		if d > 0 {
			r.timeout = d
		}
	}
}

// WithPollInterval sets how often the Job's status is read (default 2s).
func WithPollInterval(d time.Duration) Option { return func(r *Runner) { r.poll = d } }

// WithTailLines sets how many log lines a failure reports (default 20).
func WithTailLines(n int) Option { return func(r *Runner) { r.tail = n } }

// New returns a Runner for namespace.
func New(kube kubernetes.Interface, namespace string, opts ...Option) *Runner {
	r := &Runner{kube: kube, namespace: namespace, out: io.Discard, timeout: 10 * time.Minute, poll: 2 * time.Second, tail: 20}
	for _, o := range opts {
		o(r)
	}
	return r
}

// Result is the outcome of a successful run.
type Result struct {
	Job      string        `json:"job"`
	Skipped  bool          `json:"skipped"`
	Duration time.Duration `json:"duration"`
}

// FailedError is a migration Job that failed, timed out or was interrupted.
type FailedError struct {
	Namespace, Job string
	Reason         string
	LastLines      []string
	Err            error
}

func (e *FailedError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "migration Job %s/%s %s", e.Namespace, e.Job, e.Reason)
	if e.Err != nil {
		fmt.Fprintf(&b, ": %v", e.Err)
	}
	if len(e.LastLines) > 0 {
		fmt.Fprintf(&b, "\nlast %d log lines:\n  %s", len(e.LastLines), strings.Join(e.LastLines, "\n  "))
	} else {
		b.WriteString(" (no logs could be read)")
	}
	return b.String()
}

func (e *FailedError) Unwrap() error { return e.Err }

// Run runs job to completion. A Job of the same name that already completed is not run again
// (the migrations of that version are done); one that failed is deleted and created afresh; one
// still running (left by an interrupted run) is waited on. On timeout or cancellation the Job is
// deleted with its pods; a failed Job is kept for inspection (the next run replaces it).
func (r *Runner) Run(ctx context.Context, job *batchv1.Job) (*Result, error) {
	start := time.Now()
	if job.Namespace == "" {
		job = job.DeepCopy()
		job.Namespace = r.namespace
	}
	if job.Namespace != r.namespace {
		return nil, fmt.Errorf("migration Job %s is for namespace %q, not the release namespace %q", job.Name, job.Namespace, r.namespace)
	}
	jobs := r.kube.BatchV1().Jobs(r.namespace)
	current, err := jobs.Get(ctx, job.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		current = nil
	case err != nil:
		return nil, fmt.Errorf("reading migration Job %s/%s: %w", r.namespace, job.Name, err)
	case finished(current, batchv1.JobComplete):
		r.printf("migrations: Job %s already completed; skipping", job.Name)
		return &Result{Job: job.Name, Skipped: true, Duration: time.Since(start)}, nil
	case finished(current, batchv1.JobFailed):
		r.printf("migrations: Job %s failed in an earlier run; replacing it", job.Name)
		if err := r.delete(ctx, job.Name); err != nil {
			return nil, err
		}
		current = nil
	default:
		r.printf("migrations: Job %s is still running from an earlier run; waiting for it", job.Name)
	}
	if current == nil {
		if current, err = jobs.Create(ctx, job, metav1.CreateOptions{}); err != nil {
			return nil, fmt.Errorf("creating migration Job %s/%s: %w", r.namespace, job.Name, err)
		}
		r.printf("migrations: created Job %s, waiting up to %s", job.Name, r.timeout)
	}

	logs := newTail(r.tail)
	wctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	streams := &streamer{r: r, job: current, logs: logs, seen: map[string]bool{}}
	defer streams.stop()

	var final *batchv1.Job
	// The Job's own log lines are streamed too, but a migration may be silent for minutes.
	sayer := readiness.NewSayer(func(line string) { r.printf("%s", line) }, "migrations: waiting for Job "+job.Name, r.timeout)
	err = wait.PollUntilContextCancel(wctx, r.poll, true, func(ctx context.Context) (bool, error) {
		j, err := jobs.Get(ctx, job.Name, metav1.GetOptions{})
		if err != nil {
			return false, nil // transient; the deadline bounds retries
		}
		streams.follow(ctx)
		if finished(j, batchv1.JobComplete) || finished(j, batchv1.JobFailed) {
			final = j
			return true, nil
		}
		sayer.Tick(fmt.Sprintf("%d pod(s) running, %d failed", j.Status.Active, j.Status.Failed))
		return false, nil
	})
	if err != nil {
		// Timed out or interrupted: do not leave the Job running.
		reason := fmt.Sprintf("did not finish within %s", r.timeout)
		if ctx.Err() != nil {
			reason = "interrupted"
		}
		dctx, dcancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer dcancel()
		streams.stop()
		streams.wg.Wait()
		lines := r.lastLines(dctx, current, logs)
		if derr := r.delete(dctx, job.Name); derr != nil {
			err = errors.Join(err, derr)
		} else {
			reason += "; the Job and its pods were deleted"
		}
		return nil, &FailedError{Namespace: r.namespace, Job: job.Name, Reason: reason, LastLines: lines, Err: err}
	}
	streams.follow(ctx) // pods that started between the last poll and the end
	streams.wait()
	if finished(final, batchv1.JobFailed) {
		lines := r.lastLines(ctx, current, logs)
		c := condition(final, batchv1.JobFailed)
		return nil, &FailedError{Namespace: r.namespace, Job: job.Name, LastLines: lines,
			Reason: fmt.Sprintf("failed (%s: %s); inspect it with `kubectl -n %s logs job/%s`", c.Reason, c.Message, r.namespace, job.Name)}
	}
	r.printf("migrations: Job %s completed in %s", job.Name, time.Since(start).Round(time.Second))
	return &Result{Job: job.Name, Duration: time.Since(start)}, nil
}

func (r *Runner) printf(format string, args ...any) { fmt.Fprintf(r.out, format+"\n", args...) }

func condition(j *batchv1.Job, t batchv1.JobConditionType) batchv1.JobCondition {
	for _, c := range j.Status.Conditions {
		if c.Type == t {
			return c
		}
	}
	return batchv1.JobCondition{}
}

func finished(j *batchv1.Job, t batchv1.JobConditionType) bool {
	return j != nil && condition(j, t).Status == corev1.ConditionTrue
}

// delete removes the Job and (background propagation) its pods, and waits until it is gone so
// that a Job of the same name can be created.
func (r *Runner) delete(ctx context.Context, name string) error {
	jobs := r.kube.BatchV1().Jobs(r.namespace)
	err := jobs.Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting migration Job %s/%s: %w", r.namespace, name, err)
	}
	err = wait.PollUntilContextTimeout(ctx, r.poll, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := jobs.Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		return fmt.Errorf("waiting for migration Job %s/%s to be deleted: %w", r.namespace, name, err)
	}
	return nil
}

// pods lists the Job's pods: by the job-name label, and by owner when the Job has a UID (a
// replaced Job's pods may still be terminating under the same name).
func (r *Runner) pods(ctx context.Context, job *batchv1.Job) ([]corev1.Pod, error) {
	list, err := r.kube.CoreV1().Pods(r.namespace).List(ctx, metav1.ListOptions{LabelSelector: "job-name=" + job.Name})
	if err != nil {
		return nil, err
	}
	var out []corev1.Pod
	for _, p := range list.Items {
		if job.UID != "" {
			owned := false
			for _, o := range p.OwnerReferences {
				owned = owned || o.UID == job.UID
			}
			if !owned {
				continue
			}
		}
		out = append(out, p)
	}
	return out, nil
}

// lastLines returns the streamed tail, or reads it from the newest pod when streaming got nothing.
func (r *Runner) lastLines(ctx context.Context, job *batchv1.Job, t *tail) []string {
	if lines := t.lines(); len(lines) > 0 {
		return lines
	}
	pods, err := r.pods(ctx, job)
	if err != nil || len(pods) == 0 {
		return nil
	}
	newest := pods[0]
	for _, p := range pods[1:] {
		if p.CreationTimestamp.After(newest.CreationTimestamp.Time) {
			newest = p
		}
	}
	raw, err := r.kube.CoreV1().Pods(r.namespace).GetLogs(newest.Name, &corev1.PodLogOptions{
		Container: ContainerName, TailLines: ptr.To(int64(r.tail)),
	}).DoRaw(ctx)
	if err != nil {
		return nil
	}
	for _, l := range strings.Split(strings.TrimRight(string(raw), "\n"), "\n") {
		t.add(l)
	}
	return t.lines()
}

// streamer follows the logs of each pod of the Job once its container has started.
type streamer struct {
	r       *Runner
	job     *batchv1.Job
	logs    *tail
	seen    map[string]bool
	wg      sync.WaitGroup
	cancels []context.CancelFunc
	mu      sync.Mutex
}

func (s *streamer) follow(ctx context.Context) {
	pods, err := s.r.pods(ctx, s.job)
	if err != nil {
		return
	}
	for _, p := range pods {
		if s.seen[p.Name] || !started(&p) {
			continue
		}
		s.seen[p.Name] = true
		// Log streams outlive one poll: give them their own context, stopped by stop().
		sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		s.mu.Lock()
		s.cancels = append(s.cancels, cancel)
		s.mu.Unlock()
		s.wg.Add(1)
		go func(pod string) {
			defer s.wg.Done()
			s.stream(sctx, pod)
		}(p.Name)
	}
}

func started(p *corev1.Pod) bool {
	if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return true
	}
	for _, c := range p.Status.ContainerStatuses {
		if c.Name == ContainerName && (c.State.Running != nil || c.State.Terminated != nil) {
			return true
		}
	}
	return false
}

func (s *streamer) stream(ctx context.Context, pod string) {
	rc, err := s.r.kube.CoreV1().Pods(s.r.namespace).GetLogs(pod, &corev1.PodLogOptions{Container: ContainerName, Follow: true}).Stream(ctx)
	if err != nil {
		s.r.printf("migrations: cannot read logs of pod %s: %v", pod, err)
		return
	}
	defer rc.Close()
	sc := bufio.NewScanner(rc)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		s.logs.add(line)
		s.r.printf("  %s | %s", pod, line)
	}
}

// stop ends the log streams (a finished container closes its stream by itself).
func (s *streamer) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.cancels {
		c()
	}
}

// wait lets the streams drain what the finished container wrote, then stops them.
func (s *streamer) wait() {
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		s.stop()
		<-done
	}
	s.stop()
}

// tail keeps the last n lines.
type tail struct {
	mu  sync.Mutex
	n   int
	buf []string
}

func newTail(n int) *tail { return &tail{n: n} }

func (t *tail) add(line string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, line)
	if len(t.buf) > t.n {
		t.buf = t.buf[len(t.buf)-t.n:]
	}
}

func (t *tail) lines() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]string(nil), t.buf...)
}
