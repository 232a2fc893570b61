package local

import (
	"context"
	"fmt"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster"
)

// What a local cluster's handle (cluster.Cluster) keeps beside its clients, through
// cluster.Cluster's SetValue, and what reaches the cluster's host programs through it.

// podsDirKey keeps with a local cluster's handle the directory of its host programs' pods,
// <cluster dir>/pods.
type podsDirKey struct{}

// PodsDir is the directory of a local cluster's host programs' pods, "" for a cluster of
// another provider. A cluster's deletion kills what runs under it (killProcessesUnder): the
// servers that run beside a local cluster (Dex, the Gateway) work there.
func PodsDir(c *cluster.Cluster) string {
	dir, _ := c.Value(podsDirKey{}).(string)
	return dir
}

// hostsKey keeps with a local cluster's handle the runner of its host programs.
type hostsKey struct{}

// hostsOf is the runner of the cluster's host programs, nil when it runs none.
func hostsOf(c *cluster.Cluster) *hostRunner {
	r, _ := c.Value(hostsKey{}).(*hostRunner)
	return r
}

// RunHostPrograms runs programs for the pods of a cluster created with WithHostProgramStages
// of the same programs, until ctx ends (then it stops their processes). ready, when not nil,
// is called once the runner watches, with the runner's ServiceAddress.
func RunHostPrograms(ctx context.Context, c *cluster.Cluster, programs []Program, backends []HostBackend, ready func(address func(ns, svc string, port int32) (string, error))) error {
	podsDir := PodsDir(c)
	if podsDir == "" {
		return fmt.Errorf("cluster %s: host programs run on the local provider only", c.Name)
	}
	r, err := newHostRunner(c, podsDir, programs, backends)
	if err != nil {
		return err
	}
	c.SetValue(hostsKey{}, r)
	if ready != nil {
		ready(r.proxy.Address)
	}
	r.run(ctx)
	return nil
}

// ServiceAddress is the loopback address that reaches a Service port from this machine, as
// the host programs reach it (a test's client, `make demo`'s printed address).
func ServiceAddress(c *cluster.Cluster, namespace, service string, port int32) (string, error) {
	hosts := hostsOf(c)
	if hosts == nil {
		return "", fmt.Errorf("cluster %s runs no host programs (WithHostPrograms)", c.Name)
	}
	return hosts.proxy.Address(namespace, service, port)
}

// PodVolumeDir is the directory on this machine of a volume of a pod that runs a host program
// (its files as the process sees them: an emptyDir's contents), "" for a cluster of another
// provider.
func PodVolumeDir(c *cluster.Cluster, p *corev1.Pod, volume string) string {
	dir := PodsDir(c)
	if dir == "" {
		return ""
	}
	return filepath.Join(podDir(dir, p), "volumes", volume)
}
