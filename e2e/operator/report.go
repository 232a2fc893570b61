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
}

// Where a run's identity is (mloperator controllers/operation_sync.go getInstanceInfo; the
// agent writes them in polyaxon _k8s/converter/base/base.py).
const (
	labelInstance     = "app.kubernetes.io/instance" // the run's uuid
	annotationOwner   = "operation.polyaxon.com/owner"
	annotationProject = "operation.polyaxon.com/project"
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
	}
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
	Client  *http.Client
	Log     *slog.Logger
	// Backoff between attempts: First, doubled up to Max; a report is dropped after Attempts.
	First, Max time.Duration
	Attempts   int

	mu    sync.Mutex
	queue []Report
	wake  chan struct{} // signalled by Enqueue
}

// NewReporter reports to the API cfg names.
func NewReporter(cfg Config, log *slog.Logger) *Reporter {
	return &Reporter{
		BaseURL:  cfg.APIURL(),
		Token:    cfg.AuthToken,
		Client:   &http.Client{Timeout: 35 * time.Second}, // mloperator's apiServerDefaultTimeout
		Log:      log,
		First:    250 * time.Millisecond,
		Max:      15 * time.Second,
		Attempts: 10,
		wake:     make(chan struct{}, 1),
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

// deliver sends rep until the API takes it, refuses it for good, or the attempts run out.
func (r *Reporter) deliver(ctx context.Context, rep Report) {
	wait := r.First
	for attempt := 1; ; attempt++ {
		retry, err := r.Send(ctx, rep)
		if err == nil {
			r.Log.Info("reported status", "run", rep.UUID, "status", rep.Condition.Type.Status())
			return
		}
		if !retry || attempt >= r.Attempts || ctx.Err() != nil {
			r.Log.Error("status not reported", "run", rep.UUID, "status", rep.Condition.Type.Status(), "attempts", attempt, "err", err)
			return
		}
		r.Log.Warn("status report failed, retrying", "run", rep.UUID, "status", rep.Condition.Type.Status(), "in", wait, "err", err)
		select {
		case <-ctx.Done():
			return
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
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return false, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("X-POLYAXON-SERVICE", "operator")
	if r.Token != "" {
		req.Header.Set("Authorization", "Token "+r.Token)
	}
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
