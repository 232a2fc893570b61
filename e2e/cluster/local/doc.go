// Package local is the local provider (Provider): a real etcd, kube-apiserver,
// kube-controller-manager and kube-scheduler plus the kwok controller, run as local processes
// by `kwokctl --runtime binary`, on the node pools of e2e/cluster; and Polyaxon's own programs
// run on this machine for the platform's pods (host programs).
//
// Facts about kwok v0.8.0 this package relies on (checked against its source and docs):
//
//   - `kwokctl create cluster --runtime binary` takes every binary from the config options
//     kubeApiserverBinary, kubeControllerManagerBinary, kubeSchedulerBinary, etcdBinary,
//     kwokControllerBinary (also flags --kube-apiserver-binary etc.); a local path is symlinked,
//     a URL would be downloaded. kwokctl also runs `kubectl get --raw /version` to see the API
//     server serve: it takes kubectl from PATH first, else kubectlBinary (a download by
//     default), so our kubectl's directory goes first on PATH.
//   - `kwokctl -c FILE` reads a multi-document YAML: KwokctlConfiguration
//     (config.kwok.x-k8s.io/v1alpha1) plus kwok.x-k8s.io/v1alpha1 Stage, ClusterExec, ... .
//     There is no flag for the bind address; options.bindAddress defaults to 0.0.0.0, so we set
//     127.0.0.1. Ports left 0 are picked by kwokctl, searching down from 32766 in every
//     process, so parallel creations collide; we set etcdPort, etcdPeerPort,
//     kubeApiserverPort, kubeControllerManagerPort, kubeSchedulerPort and kwokControllerPort
//     from a machine-wide reservation file instead (ports.go). The kwok controller exits when
//     its port is taken, after the API server already serves: Create probes it with a node.
//   - KWOK_WORKDIR (default ~/.kwok) holds clusters/<name>/ with kwok.yaml (the saved config),
//     pki/, etcd/, logs/<component>.log and pids/<component>.pid. The components are forked
//     into the background and outlive kwokctl; `kwokctl delete cluster` kills them by pid file
//     and removes the directory. Other KWOK_* variables override options, so we clear them.
//   - `create cluster --kubeconfig PATH` adds a context kwok-<name> to PATH (default
//     ~/.kube/config, which we never touch); `delete cluster --kubeconfig PATH` removes it.
//   - The binary runtime starts the kwok controller with --manage-all-nodes=true, so every Node
//     is simulated; we still mark ours kwok.x-k8s.io/node=fake and type=kwok as kwok's docs do.
//     A Node created with status.allocatable/capacity keeps them (the node-initialize stage only
//     fills defaults); kwok sets Ready, the kubelet endpoint port and lease heartbeats. The node's
//     Hostname address is "localhost", which is how the API server reaches the kwok controller
//     for exec.
//   - Stages: kwokctl adds its default stages (node-initialize, node-heartbeat-with-lease,
//     pod-ready, pod-complete for pods owned by a Job, pod-delete) only when the config has no
//     Stage at all. So when we add a stage we add those defaults too: build-binaries.sh copies
//     them from the kwok module (kustomize/stage/...) into <bindir>/kwok-stages/.
//     When several stages match an object kwok picks one at random weighted by spec.weight, and
//     a weight-0 stage loses to any positive weight; FailPodStage uses that.
//   - ClusterExec selects pods only by namespace (matchNamespaces) and name (matchNames). The
//     command of the exec request runs on this machine, started by the kwok controller, with
//     local.envs appended to the controller's environment and local.workDir as directory.
//     A namespaced Exec named like the pod wins over any ClusterExec. ClusterExecs are read
//     once at start, so select by pod name (or nothing) when namespaces are not known yet.
//     The command's stdin is never closed by kwok: a command fed on stdin must stop reading by
//     itself (`head -c N | ...`); `cat` waits forever. A non-zero exit comes back as an API
//     error whose message ends in "exit status N", not as a client-go CodeExitError.
//   - kwok provides no StorageClass or volume provisioner. We add a default StorageClass
//     (kubernetes.io/no-provisioner, Immediate binding) and static hostPath volumes with
//     reclaim policy Retain; the real scheduler and kube-controller-manager bind them.
//     A background reclaimer (while the Cluster handle lives) makes Released volumes Available.
//   - With the default secure port, kwokctl enables RBAC (Node,RBAC) and admission plugins, so
//     Pod Security admission and RBAC behave as on a real cluster.
//
// Host programs (WithHostPrograms, local provider only). A pod whose first container's image
// is a Program's runs that program on this machine, as a process, in place of the container:
//
//   - Mechanism: kwok Stages (HostProgramStages) make such a pod Running with its containers
//     started and not Ready, and keep kwok's pod-ready and pod-complete stages off it; a
//     watcher of the provider (hostRunner, a pod informer) then starts the process and owns the
//     pod's status from there: Ready when the container's own readiness probe (httpGet,
//     tcpSocket, or exec through Program.ExecProbe) passes against the process (every 2 s at
//     most until then; an HTTP or TCP probe goes on at the probe's own period, as on a
//     kubelet, while an exec probe, which starts a program of seconds of CPU, waits for its
//     initial delay, is timed out on its CPU time (runExecProbe: every simulated node
//     shares this machine's cores), and is not repeated once the pod is Ready),
//     and, when the process exits, the container terminated with its exit code (phase
//     Succeeded or Failed).
//     Deleting the pod stops the process (SIGTERM, then SIGKILL after the grace period).
//     An exit restarts the container in its pod, after the kubelet's back-off, or ends the
//     pod, as the pod's restartPolicy says (hostrestart.go). The pod's other containers with
//     a program run beside the first, and its native sidecars (init containers that restart
//     Always) from before it until it ended for good, then get SIGTERM as on a kubelet (a
//     run's sidecar uploads last then): hostcompanions.go.
//     Pods annotated FailAnnotation keep kwok's failure instead.
//   - Environment: ContainerEnv computes it from the pod spec as the kubelet does (envFrom,
//     env, valueFrom from ConfigMaps, Secrets, the pod's fields and resources, $(VAR)); the
//     volumes are written under the pod's directory as the kubelet would mount them (a
//     hostPath is that directory of this machine, which stands for the node). What a
//     process here cannot have is rewritten, each rewrite a row of HostRewrites (the README
//     prints the table): Service names become loopback listeners that forward to a Ready
//     endpoint of the Service (serviceProxy reads EndpointSlices, as kube-proxy does), the
//     in-cluster API config a kubeconfig with a token of the pod's own ServiceAccount
//     (TokenRequest), mount paths the pod's directories.
//   - Logs: the process's output is written in the CRI log format and served by kwok as the
//     container's log: kwokctl runs with the Logs kind enabled as a CRD, and the watcher
//     creates a Logs object named like the pod, owned by it.
//   - Real servers behind simulated pods (WithHostBackend): the Postgres pod's Service forwards
//     to a real PostgreSQL on this machine.
//
// PolyaxonPrograms is the table for Polyaxon's images: haupt's API (and its management
// commands for the migration and admin-user Jobs) and the polyaxon agent from the virtual
// environment of e2e/scripts/install-polyaxon.sh, and the operator stand-in (e2e/operator).
package local
