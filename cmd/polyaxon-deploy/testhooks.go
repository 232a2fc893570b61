package main

import (
	"net/http"
	"strings"
	"sync"
)

// killAfterDelete calls kill after the first successful DELETE of an object of resource: the
// crash hook of the e2e build (testhooks_e2e.go), as a crash in the middle of Helm's deletions
// would be. The shipped binary never installs it.
func killAfterDelete(resource string, kill func()) func(http.RoundTripper) http.RoundTripper {
	var once sync.Once
	return func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			resp, err := rt.RoundTrip(req)
			if err == nil && req.Method == http.MethodDelete && resp.StatusCode < 300 &&
				strings.Contains(req.URL.Path, "/"+resource+"/") {
				once.Do(kill)
			}
			return resp, err
		})
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
