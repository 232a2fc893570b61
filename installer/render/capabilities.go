package render

import (
	"context"
	"fmt"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chartutil"
	"k8s.io/client-go/discovery"
)

// Cluster is what a cluster tells Helm about itself when it installs or upgrades: the server
// version and every group/version and group/version/Kind discovery serves. Rendering with it
// (Options.Cluster) gives .Capabilities exactly as Helm's install and upgrade see them, so
// check and plan judge the objects Helm will apply (the run admission policies exist only
// where the server serves admissionregistration.k8s.io/v1 MutatingAdmissionPolicy).
type Cluster struct {
	KubeVersion chartutil.KubeVersion
	APIVersions chartutil.VersionSet
}

// ClusterCapabilities reads the server version and discovery's version set the way Helm's
// action.Configuration does (action.GetVersionSet; a group that fails discovery is skipped,
// as Helm skips it). Discovery calls take no context: ctx bounds the wait.
func ClusterCapabilities(ctx context.Context, dc discovery.DiscoveryInterface) (*Cluster, error) {
	type result struct {
		c   *Cluster
		err error
	}
	ch := make(chan result, 1)
	go func() {
		v, err := dc.ServerVersion()
		if err != nil {
			ch <- result{err: fmt.Errorf("server version: %w", err)}
			return
		}
		set, err := action.GetVersionSet(dc)
		if err != nil && !discovery.IsGroupDiscoveryFailedError(err) {
			ch <- result{err: err}
			return
		}
		ch <- result{c: &Cluster{
			KubeVersion: chartutil.KubeVersion{Version: v.GitVersion, Major: v.Major, Minor: v.Minor},
			APIVersions: set,
		}}
	}()
	select {
	case r := <-ch:
		return r.c, r.err
	case <-ctx.Done():
		return nil, fmt.Errorf("reading the cluster's capabilities: %w", ctx.Err())
	}
}

// Has reports whether the cluster serves a group/version or group/version/Kind.
func (c *Cluster) Has(apiVersion string) bool { return c != nil && c.APIVersions.Has(apiVersion) }

// MutatingPolicyKinds are the admission policy kinds the chart's run placement needs.
func MutatingPolicyKinds() []string { return append([]string(nil), mutatingPolicyKinds...) }

func capabilities(opts Options) (*chartutil.Capabilities, error) {
	if c := opts.Cluster; c != nil {
		// Exactly Helm's: its install replaces the version set with discovery's.
		return &chartutil.Capabilities{
			KubeVersion: c.KubeVersion,
			APIVersions: append(chartutil.VersionSet(nil), c.APIVersions...),
			HelmVersion: chartutil.DefaultCapabilities.HelmVersion,
		}, nil
	}
	kv, err := chartutil.ParseKubeVersion(opts.KubeVersion)
	if err != nil {
		return nil, fmt.Errorf("kube version %q: %w", opts.KubeVersion, err)
	}
	caps := chartutil.DefaultCapabilities.Copy()
	caps.KubeVersion = *kv
	extra := opts.APIVersions
	if len(extra) == 0 {
		extra = defaultKinds(kv)
	}
	if len(extra) > 0 {
		caps.APIVersions = append(append(chartutil.VersionSet{}, caps.APIVersions...), extra...)
	}
	return caps, nil
}
