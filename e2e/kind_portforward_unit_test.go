package e2e

import (
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// flakyForward listens like kubectl port-forward that drops its first `drops` connections before
// they are answered, then answers every request with status.
func flakyForward(t *testing.T, drops int, status int) (string, *atomic.Int32) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	var answered atomic.Int32
	go func() {
		for range drops {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			conn.Close()
		}
		_ = http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			answered.Add(1)
			_, _ = io.Copy(io.Discard, r.Body)
			w.WriteHeader(status)
		}))
	}()
	return "http://" + ln.Addr().String(), &answered
}

func TestResendingClientResendsOnlyWhatTheForwardingDropped(t *testing.T) {
	client := resendingClient(&http.Client{Transport: &http.Transport{DisableKeepAlives: true}})

	url, answered := flakyForward(t, 2, http.StatusOK)
	resp, err := client.Get(url)
	require.NoError(t, err, "a GET cut twice by the forwarding is sent again")
	resp.Body.Close()
	assert.Equal(t, int32(1), answered.Load())

	url, answered = flakyForward(t, 1, http.StatusOK)
	req, err := http.NewRequest(http.MethodPost, url, nil)
	require.NoError(t, err)
	req.GetBody = func() (io.ReadCloser, error) { return chunkedJSON(2), nil }
	req.Body, _ = req.GetBody()
	resp, err = client.Do(req)
	require.NoError(t, err, "a POST whose body can be made again is sent again")
	resp.Body.Close()

	url, answered = flakyForward(t, 1, http.StatusOK)
	_, err = client.Post(url, "text/plain", io.NopCloser(strings.NewReader("once")))
	require.Error(t, err, "a body that cannot be made again is not sent twice")
	assert.Equal(t, int32(0), answered.Load())

	url, answered = flakyForward(t, 0, http.StatusBadGateway)
	resp, err = client.Get(url)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusBadGateway, resp.StatusCode, "an answer is returned as it is")
	assert.Equal(t, int32(1), answered.Load(), "an answer, even an error status, is not asked again")
}
