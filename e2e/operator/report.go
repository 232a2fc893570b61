package operator

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Report is one status transition of one run, for Polyaxon's API.
type Report struct {
	Owner, Project, UUID string
	Condition            Condition
	// CollectLogs, on a run's final transition: first have streams archive the run's pod logs
	// (Namespace and Kind locate them). The published operator does it in its logs finalizer,
	// when the run's resource is deleted; this stand-in does it before the final status, so
	// that a finished run's logs are in the artifacts store by the time the API says it ended.
	CollectLogs     bool
	Namespace, Kind string
}

// Where a run's identity is (mloperator controllers/operation_sync.go getInstanceInfo; the
// agent writes them in polyaxon _k8s/converter/base/base.py).
const (
	labelInstance     = "app.kubernetes.io/instance" // the run's uuid
	annotationOwner   = "operation.polyaxon.com/owner"
	annotationProject = "operation.polyaxon.com/project"
	annotationKind    = "operation.polyaxon.com/kind" // the run's kind: job, service, ...
)

// reportFor is the report of c for cr, if cr asks for its statuses to be synced and says
// whose run it is.
func reportFor(cr *unstructured.Unstructured, c Condition) (Report, bool) {
	wanted, _, _ := unstructured.NestedBool(cr.Object, "syncStatuses")
	r := Report{
		Owner:     cr.GetAnnotations()[annotationOwner],
		Project:   cr.GetAnnotations()[annotationProject],
		UUID:      cr.GetLabels()[labelInstance],
		Condition: c,
		Namespace: cr.GetNamespace(),
		Kind:      cr.GetAnnotations()[annotationKind],
	}
	collect, _, _ := unstructured.NestedBool(cr.Object, "collectLogs")
	r.CollectLogs = collect && c.Type.Done() && r.Kind != ""
	return r, wanted && r.Owner != "" && r.Project != "" && r.UUID != ""
}

// statusBody is create_run_status's body, V1EntityStatusBodyRequest (polyaxon
// _sdk/api/runs_v1_api.py, _schemas/lifecycle.py V1StatusCondition). status is the string
// "True" as the operator sends it; the API also takes a boolean.
type statusBody struct {
	Condition statusCondition `json:"condition"`
}

type statusCondition struct {
	Type               string `json:"type"`
	Status             string `json:"status"`
	Reason             string `json:"reason,omitempty"`
	Message            string `json:"message,omitempty"`
	LastUpdateTime     string `json:"last_update_time"`
	LastTransitionTime string `json:"last_transition_time"`
}

// Reporter posts reports to Polyaxon's API one at a time, in order, retrying each with
// backoff while the API fails.
type Reporter struct {
	BaseURL string // scheme://host:port
	Token   string
	// InternalToken authenticates the logs collection; without it no logs are collected.
	InternalToken string
	Client        *http.Client
	Log           *slog.Logger
	// Backoff between attempts: First, doubled up to Max; a report is dropped after Attempts.
	First, Max time.Duration
	Attempts   int

	mu    sync.Mutex
	queue []Report
	wake  chan struct{} // signalled by Enqueue
}

// NewReporter reports to the API cfg names.
func NewReporter(cfg Config, log *slog.Logger) *Reporter {
	internal := ""
	if cfg.CollectLogs {
		internal = cfg.InternalToken
	}
	return &Reporter{
		InternalToken: internal,
		BaseURL:       cfg.APIURL(),
		Token:         cfg.AuthToken,
		Client:        &http.Client{Timeout: 35 * time.Second}, // mloperator's apiServerDefaultTimeout
		Log:           log,
		First:         250 * time.Millisecond,
		Max:           15 * time.Second,
		Attempts:      10,
		wake:          make(chan struct{}, 1),
	}
}

// Enqueue adds r behind the reports not yet sent; it never blocks.
func (r *Reporter) Enqueue(rep Report) {
	r.mu.Lock()
	r.queue = append(r.queue, rep)
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default: // a wake-up is already pending
	}
}

// Run sends queued reports until ctx is done.
func (r *Reporter) Run(ctx context.Context) {
	for {
		rep, ok := r.next()
		if !ok {
			select {
			case <-ctx.Done():
				return
			case <-r.wake:
				continue
			}
		}
		r.deliver(ctx, rep)
		if ctx.Err() != nil {
			return
		}
	}
}

func (r *Reporter) next() (Report, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.queue) == 0 {
		return Report{}, false
	}
	rep := r.queue[0]
	r.queue = r.queue[1:]
	return rep, true
}

// deliver sends rep (after collecting the run's logs, when it asks for it) until the API
// takes it, refuses it for good, or the attempts run out. Logs that cannot be collected do not
// hold the status back.
func (r *Reporter) deliver(ctx context.Context, rep Report) {
	if rep.CollectLogs && r.InternalToken != "" {
		// Fewer attempts than a status: a streams that cannot collect must not hold it back long.
		if n, err := r.retry(ctx, "logs collection", min(r.Attempts, 3), func(ctx context.Context) (bool, error) { return r.CollectLogs(ctx, rep) }); err != nil {
			r.Log.Error("logs not collected", "run", rep.UUID, "attempts", n, "err", err)
		} else {
			r.Log.Info("collected logs", "run", rep.UUID)
		}
	}
	n, err := r.retry(ctx, "status report", r.Attempts, func(ctx context.Context) (bool, error) { return r.Send(ctx, rep) })
	if err != nil {
		r.Log.Error("status not reported", "run", rep.UUID, "status", rep.Condition.Type.Status(), "attempts", n, "err", err)
		return
	}
	r.Log.Info("reported status", "run", rep.UUID, "status", rep.Condition.Type.Status())
}

// retry makes attempts until one succeeds, fails for good, or the attempts run out, with
// backoff between them, and says how many it made.
func (r *Reporter) retry(ctx context.Context, what string, attempts int, attempt func(context.Context) (retry bool, err error)) (int, error) {
	wait := r.First
	for n := 1; ; n++ {
		again, err := attempt(ctx)
		if err == nil {
			return n, nil
		}
		if !again || n >= attempts || ctx.Err() != nil {
			return n, err
		}
		r.Log.Warn(what+" failed, retrying", "in", wait, "err", err)
		select {
		case <-ctx.Done():
			return n, ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, r.Max)
	}
}

// Send makes one attempt: POST /api/v1/{owner}/{project}/runs/{uuid}/statuses. retry says
// whether another attempt may succeed (network errors, 5xx, 408, 429).
func (r *Reporter) Send(ctx context.Context, rep Report) (retry bool, err error) {
	body, err := json.Marshal(statusBody{Condition: statusCondition{
		Type:               rep.Condition.Type.Status(),
		Status:             rep.Condition.Status,
		Reason:             rep.Condition.Reason,
		Message:            rep.Condition.Message,
		LastUpdateTime:     rep.Condition.LastUpdateTime.UTC().Format(time.RFC3339),
		LastTransitionTime: rep.Condition.LastTransitionTime.UTC().Format(time.RFC3339),
	}})
	if err != nil {
		return false, err
	}
	u := fmt.Sprintf("%s/api/v1/%s/%s/runs/%s/statuses", r.BaseURL,
		url.PathEscape(rep.Owner), url.PathEscape(rep.Project), url.PathEscape(rep.UUID))
	header := http.Header{"Content-Type": {"application/json"}, "X-Polyaxon-Service": {"operator"}}
	if r.Token != "" {
		header.Set("Authorization", "Token "+r.Token)
	}
	return r.post(ctx, u, header, body)
}

// CollectLogs makes one attempt at POST /internal/v1/{namespace}/{owner}/{project}/runs/{uuid}/{kind}/logs
// (polyaxon _sdk/api/runs_v1_api.py collect_run_logs), authenticated as the operator with the
// internal token (mloperator controllers/plugins/polyaxon.go): streams reads the run's pod
// logs from Kubernetes and archives them in the artifacts store.
func (r *Reporter) CollectLogs(ctx context.Context, rep Report) (retry bool, err error) {
	u := fmt.Sprintf("%s/internal/v1/%s/%s/%s/runs/%s/%s/logs", r.BaseURL, url.PathEscape(rep.Namespace),
		url.PathEscape(rep.Owner), url.PathEscape(rep.Project), url.PathEscape(rep.UUID), url.PathEscape(rep.Kind))
	header := http.Header{"Authorization": {"InternalToken " + r.InternalToken}, "X-Polyaxon-Internal": {"operator"}}
	return r.post(ctx, u, header, nil)
}

// post sends one request; retry says whether another attempt may succeed (network errors,
// 5xx, 408, 429).
func (r *Reporter) post(ctx context.Context, u string, header http.Header, body []byte) (retry bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return false, err
	}
	req.Header = header.Clone()
	req.Header.Set("Accept", "application/json")
	resp, err := r.Client.Do(req)
	if err != nil {
		return true, err
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	switch code := resp.StatusCode; {
	case code < 300:
		return false, nil
	case code >= 500, code == http.StatusRequestTimeout, code == http.StatusTooManyRequests:
		return true, fmt.Errorf("POST %s: %s: %s", u, resp.Status, bytes.TrimSpace(msg))
	default:
		return false, fmt.Errorf("POST %s: %s: %s", u, resp.Status, bytes.TrimSpace(msg))
	}
}
