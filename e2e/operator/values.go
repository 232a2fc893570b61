package operator

import (
	"encoding/json"
	"fmt"
	"math"
)

// Numbers in an unstructured object are int64 from the API server and float64 from
// encoding/json; json.Number from some decoders. asInt64 reads any of them.
func asInt64(v any) (int64, bool) {
	switch n := v.(type) {
	case int64:
		return n, true
	case int32:
		return int64(n), true
	case int:
		return int64(n), true
	case float64:
		if n == math.Trunc(n) {
			return int64(n), true
		}
	case json.Number:
		i, err := n.Int64()
		return i, err == nil
	}
	return 0, false
}

// copyFields sets dst[k] = src[k] for each k of keys that src has.
func copyFields(dst, src map[string]any, keys ...string) {
	for _, k := range keys {
		if v, ok := src[k]; ok && v != nil {
			dst[k] = v
		}
	}
}

// termination is the resource's termination block (polyaxon setter.py set_termination).
func termination(crObject map[string]any) map[string]any {
	t, _ := crObject["termination"].(map[string]any)
	if t == nil {
		return map[string]any{}
	}
	return t
}

// backoffLimit is the termination's, else 0: a failed run is not retried unless it asks
// (mloperator utils.GetBackoffLimit).
func backoffLimit(t map[string]any) int64 {
	if n, ok := asInt64(t["backoffLimit"]); ok {
		return n
	}
	return 0
}

// stringMap turns a map of scalars into a map of strings (Ray's rayStartParams are strings).
func stringMap(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		if s, ok := v.(string); ok {
			out[k] = s
		} else if n, ok := asInt64(v); ok {
			out[k] = fmt.Sprint(n)
		} else {
			out[k] = fmt.Sprint(v)
		}
	}
	return out
}
