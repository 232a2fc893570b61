//go:build e2ehooks

package main

import (
	"os"
	"syscall"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/kube"
)

// envKillAfterDelete is a hook of the e2e build (go build -tags e2ehooks): the process kills
// itself (SIGKILL) as soon as the API server has deleted an object of the named resource
// (plural, e.g. networkpolicies).
const envKillAfterDelete = "POLYAXON_DEPLOY_TEST_KILL_AFTER_DELETE"

// testHooks are the cluster settings' hooks the environment asks for.
func testHooks() []kube.Option {
	if resource := os.Getenv(envKillAfterDelete); resource != "" {
		return []kube.Option{kube.WithTransportWrapper(killAfterDelete(resource, func() { _ = syscall.Kill(os.Getpid(), syscall.SIGKILL) }))}
	}
	return nil
}
