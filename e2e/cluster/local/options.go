package local

import "github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster"

// localOptions are the local provider's own options of Create, kept in
// CreateOptions.ProviderOptions; the kind provider ignores them.
type localOptions struct {
	// ClusterExecs map `kubectl exec` on selected pods to local commands.
	ClusterExecs []ClusterExec
	// Stages are kwok Stage documents added on top of kwok's default stages.
	Stages []Stage
	// PodCommands runs the scripts of pods annotated RunAnnotation.
	PodCommands bool
	// Programs run on this machine for the pods of their images.
	Programs []Program
	// ProgramStages prepare the cluster for programs run by another process (RunHostPrograms).
	ProgramStages []Program
	// Backends are real servers on this machine behind simulated pods.
	Backends []HostBackend
}

// localOptionsKey is the key of localOptions in CreateOptions.ProviderOptions.
type localOptionsKey struct{}

// localOptionsOf returns the local provider's options in o, adding them when missing.
func localOptionsOf(o *cluster.CreateOptions) *localOptions {
	if lo, ok := o.ProviderOptions[localOptionsKey{}].(*localOptions); ok {
		return lo
	}
	lo := &localOptions{}
	if o.ProviderOptions == nil {
		o.ProviderOptions = map[any]any{}
	}
	o.ProviderOptions[localOptionsKey{}] = lo
	return lo
}

// localOption is a cluster.CreateOption that sets the local provider's options.
func localOption(set func(*localOptions)) cluster.CreateOption {
	return func(o *cluster.CreateOptions) { set(localOptionsOf(o)) }
}

// WithClusterExec maps `kubectl exec` on selected pods to local commands (local provider only;
// on kind exec runs in the real container).
func WithClusterExec(execs ...ClusterExec) cluster.CreateOption {
	return localOption(func(o *localOptions) { o.ClusterExecs = append(o.ClusterExecs, execs...) })
}

// WithStages adds kwok Stage documents on top of kwok's default stages (local provider only).
func WithStages(stages ...Stage) cluster.CreateOption {
	return localOption(func(o *localOptions) { o.Stages = append(o.Stages, stages...) })
}
