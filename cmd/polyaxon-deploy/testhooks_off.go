//go:build !e2ehooks

package main

import "github.com/polyaxon-deploy/polyaxon-deploy/installer/kube"

// testHooks: the shipped binary reads no test hook from its environment (testhooks_e2e.go).
func testHooks() []kube.Option { return nil }
