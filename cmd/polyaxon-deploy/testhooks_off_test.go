//go:build !e2ehooks

package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// The shipped binary (built without the e2ehooks tag) reads no crash hook from its environment.
func TestShippedBinaryReadsNoTestHook(t *testing.T) {
	t.Setenv("POLYAXON_DEPLOY_TEST_KILL_AFTER_DELETE", "networkpolicies")
	assert.Empty(t, testHooks())
}
