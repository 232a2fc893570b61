package operator

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// request is what the fake API received.
type request struct {
	Method, Path string
	Header       http.Header
	Body         map[string]any
}

// fakeAPI answers each request with the next of codes (200 once they run out).
func fakeAPI(t *testing.T, codes ...int) (*httptest.Server, func() []request) {
	var mu sync.Mutex
	var got []request
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		data, _ := io.ReadAll(r.Body)
		var body map[string]any
		if len(data) > 0 {
			assert.NoError(t, json.Unmarshal(data, &body))
		}
		mu.Lock()
		got = append(got, request{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body})
		code := http.StatusOK
		if len(codes) > 0 {
			code, codes = codes[0], codes[1:]
		}
		mu.Unlock()
		w.WriteHeader(code)
		_, _ = w.Write([]byte(`{}`))
	}))
	t.Cleanup(srv.Close)
	return srv, func() []request {
		mu.Lock()
		defer mu.Unlock()
		return append([]request(nil), got...)
	}
}

func testReporter(url, token string) *Reporter {
	r := NewReporter(Config{AuthToken: token}, testLog(nil))
	r.BaseURL = url
	r.First, r.Max = time.Millisecond, 4*time.Millisecond
	return r
}

var t0 = time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC)

func runningReport() Report {
	return Report{Owner: "acme", Project: "demo", UUID: "0f5c2a7e9b6d4c1f8e3a2b1c0d9e8f7a", Condition: Condition{
		Type: Running, Status: "True", Reason: "OperatorController", Message: "Operation is running",
		LastUpdateTime: t0, LastTransitionTime: t0,
	}}
}

// The request is create_run_status's: path, headers and V1EntityStatusBodyRequest body.
func TestSendIsCreateRunStatus(t *testing.T) {
	srv, got := fakeAPI(t)
	retry, err := testReporter(srv.URL, "secret").Send(context.Background(), runningReport())
	require.NoError(t, err)
	assert.False(t, retry)
	reqs := got()
	require.Len(t, reqs, 1)
	r := reqs[0]
	assert.Equal(t, http.MethodPost, r.Method)
	assert.Equal(t, "/api/v1/acme/demo/runs/0f5c2a7e9b6d4c1f8e3a2b1c0d9e8f7a/statuses", r.Path)
	assert.Equal(t, "Token secret", r.Header.Get("Authorization"))
	assert.Equal(t, "operator", r.Header.Get("X-POLYAXON-SERVICE"))
	assert.Equal(t, "application/json", r.Header.Get("Content-Type"))
	assert.Equal(t, map[string]any{"condition": map[string]any{
		"type":                 "running",
		"status":               "True",
		"reason":               "OperatorController",
		"message":              "Operation is running",
		"last_update_time":     "2026-05-06T07:08:09Z",
		"last_transition_time": "2026-05-06T07:08:09Z",
	}}, r.Body)
}

func TestSendWithoutATokenSendsNoAuthorization(t *testing.T) {
	srv, got := fakeAPI(t)
	_, err := testReporter(srv.URL, "").Send(context.Background(), runningReport())
	require.NoError(t, err)
	_, has := got()[0].Header["Authorization"]
	assert.False(t, has)
	assert.Equal(t, "operator", got()[0].Header.Get("X-POLYAXON-SERVICE"))
}

func TestSendSaysWhatToRetry(t *testing.T) {
	for code, retry := range map[int]bool{500: true, 503: true, 429: true, 408: true, 404: false, 403: false, 400: false} {
		srv, _ := fakeAPI(t, code)
		again, err := testReporter(srv.URL, "").Send(context.Background(), runningReport())
		require.Error(t, err, code)
		assert.Equal(t, retry, again, code)
	}
	again, err := testReporter("http://127.0.0.1:1", "").Send(context.Background(), runningReport())
	assert.Error(t, err)
	assert.True(t, again, "an API that does not answer may answer later")
}

// Run retries a failing API with backoff, keeps the order of the reports, and returns when
// its context ends.
func TestRunRetriesInOrderAndStops(t *testing.T) {
	srv, got := fakeAPI(t, 500, 502, 200, 200)
	r := testReporter(srv.URL, "")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()

	starting := runningReport()
	starting.Condition.Type = Starting
	r.Enqueue(starting)
	r.Enqueue(runningReport())
	require.Eventually(t, func() bool { return len(got()) == 4 }, 5*time.Second, 5*time.Millisecond)
	var types []string
	for _, req := range got() {
		types = append(types, req.Body["condition"].(map[string]any)["type"].(string))
	}
	assert.Equal(t, []string{"starting", "starting", "starting", "running"}, types)

	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
}

func TestRunDropsAReportAfterItsAttempts(t *testing.T) {
	srv, got := fakeAPI(t, 500, 500, 500, 200)
	log := newSyncBuffer()
	r := testReporter(srv.URL, "")
	r.Log = testLog(log)
	r.Attempts = 3
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go r.Run(ctx)
	r.Enqueue(runningReport())
	second := runningReport()
	second.Condition.Type = Succeeded
	r.Enqueue(second)
	require.Eventually(t, func() bool { return len(got()) == 4 }, 5*time.Second, 5*time.Millisecond)
	assert.Equal(t, "succeeded", got()[3].Body["condition"].(map[string]any)["type"])
	assert.Equal(t, 2, strings.Count(log.String(), "status report failed, retrying"))
	assert.Contains(t, log.String(), `msg="status not reported" run=0f5c2a7e9b6d4c1f8e3a2b1c0d9e8f7a status=running attempts=3`)
}

// A run's final report, when its resource asks for its logs, first has streams archive them
// (collect_run_logs, with the internal token, as the operator), then reports the status; logs
// streams refuses to collect do not hold the status back.
func TestFinalReportCollectsLogsFirst(t *testing.T) {
	for _, tc := range []struct {
		name  string
		codes []int
		log   string
	}{
		{"collected", []int{200, 200}, `msg="collected logs"`},
		{"refused", []int{400, 200}, `msg="logs not collected"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log := newSyncBuffer()
			got := reportFinalStatus(t, Config{AuthToken: "user", InternalToken: "internal", CollectLogs: true}, log, tc.codes...)
			require.Eventually(t, func() bool { return len(got()) == 2 }, 5*time.Second, 5*time.Millisecond)
			collect, status := got()[0], got()[1]
			assert.Equal(t, "/internal/v1/polyaxon-runs/acme/demo/runs/0f5c2a7e9b6d4c1f8e3a2b1c0d9e8f7a/job/logs", collect.Path)
			assert.Equal(t, "InternalToken internal", collect.Header.Get("Authorization"))
			assert.Equal(t, "operator", collect.Header.Get("X-Polyaxon-Internal"))
			assert.Equal(t, "/api/v1/acme/demo/runs/0f5c2a7e9b6d4c1f8e3a2b1c0d9e8f7a/statuses", status.Path)
			assert.Equal(t, "succeeded", status.Body["condition"].(map[string]any)["type"])
			require.Eventually(t, func() bool { return strings.Contains(log.String(), `msg="reported status"`) }, 5*time.Second, 5*time.Millisecond)
			assert.Contains(t, log.String(), tc.log)
		})
	}

	// Without POLYAXON_ENABLE_LOGS_FINALIZERS the operator has no internal token to call with.
	got := reportFinalStatus(t, Config{InternalToken: "internal"}, newSyncBuffer())
	require.Eventually(t, func() bool { return len(got()) == 1 }, 5*time.Second, 5*time.Millisecond)
	time.Sleep(50 * time.Millisecond)
	require.Len(t, got(), 1)
	assert.Contains(t, got()[0].Path, "/statuses")
}

// reportFinalStatus runs a reporter of cfg against an API that answers codes, and enqueues a
// run's succeeded report that asks for its logs; it returns what the API received.
func reportFinalStatus(t *testing.T, cfg Config, log *syncBuffer, codes ...int) func() []request {
	srv, got := fakeAPI(t, codes...)
	r := NewReporter(cfg, testLog(log))
	r.BaseURL = srv.URL
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go r.Run(ctx)
	rep := runningReport()
	rep.Condition.Type = Succeeded
	rep.CollectLogs, rep.Namespace, rep.Kind = true, "polyaxon-runs", "job"
	r.Enqueue(rep)
	return got
}

// A stop during a backoff wait ends Run at once.
func TestRunStopsDuringBackoff(t *testing.T) {
	srv, _ := fakeAPI(t, 500, 500, 500, 500, 500, 500)
	r := testReporter(srv.URL, "")
	r.First, r.Max = time.Hour, time.Hour
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	r.Enqueue(runningReport())
	time.Sleep(50 * time.Millisecond)
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Run kept waiting after its context ended")
	}
}
