// Package preflight holds the concrete checks run before (and after) an install or upgrade.
// Each check asks the authority: the API server's discovery for versions, a
// SelfSubjectAccessReview for permissions, a server-side dry-run for validity, the scheduler's
// predicates (via installer/plan) for placement. Guesses only warn.
//
// Check IDs are stable (they are what --ignore takes and what the README documents):
//
//	kube-api                 the API server answers (fatal)
//	kube-version             its version is inside the chart's kubeVersion range
//	release-state            an existing release is not stuck in pending-*
//	rbac                     SelfSubjectAccessReview allows every verb on every kind the release creates
//	crd-ownership            polyaxon.com CRDs are not owned by another release
//	dry-run                  a server-side dry-run of every rendered object is accepted
//	run-placement            run pods are placed per category and hardened by admission policies (warning)
//	postgres-operator        with postgresql.mode=cloudnativepg, CloudNativePG's Cluster is served and a supported operator runs
//	postgres-failover        a CloudNativePG database survives the loss of one node (warning)
//	distributed-backends     the CRDs of every enabled operators.* backend are served
//	scheduling-core          every core pod fits a Ready node (labels, taints, resources)
//	scheduling-dependencies  Postgres, RabbitMQ and Redis pods fit a Ready node
//	scheduling-<category>    a run of experiments|jobs|builds|tensorboards|notebooks can start
//	gpu-capacity             Ready nodes offer the GPUs the values ask for
//	storage-class            persistent volumes have a (default) StorageClass
//	artifacts-store          runs and the gateway can share the artifacts store (ReadWriteMany when apart)
//	artifacts-sharing        runs in their own namespace and the gateway mount claims on one store
//	artifacts-bucket         an s3 artifacts store's bucket exists and takes its Secret's keys
//	backup-location          the scheduled backups' bucket exists and takes their Secret's keys
//	ingress-class            the Ingress's class exists
//	gateway-route            the HTTPRoute's Gateways exist and a listener admits it
//	gateway-sources          the gateway's NetworkPolicy names its sources, and a namespace matches them (warning)
//	edge-secrets             the htpasswd and OIDC client Secrets the edge reads exist with their keys
//	monitoring-crds          the cluster serves the ServiceMonitor and PrometheusRule the metrics values render
//	edge-exposure            an Ingress, HTTPRoute or exposed gateway Service goes through the edge (warning)
//	gateway-replicas         gateway.replicas meets the profile's minimum
//	pod-security             every pod passes the profile's Pod Security level
//	rbac-scope               warns when rbac.clusterScoped gives the runner rights in every namespace
package preflight

import (
	"context"
	"fmt"
	"sync"
	"time"

	helmrelease "helm.sh/helm/v3/pkg/release"

	"helm.sh/helm/v3/pkg/chart"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/chartvalues"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/check"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/profile"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/release"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/render"
)

// Clients gives access to the cluster; *kube.Settings implements it.
type Clients interface {
	Clientset() (kubernetes.Interface, error)
	Dynamic() (dynamic.Interface, error)
	RESTMapper() (meta.RESTMapper, error)
}

// Env is everything the checks look at. Cluster reads are made once and shared.
type Env struct {
	Release   string
	Namespace string
	Chart     *chart.Chart
	// Rendered is the release as it would be installed (render.Render with the user's inputs).
	// Its values are decoded once, when the first check reads them: set it before any runs.
	Rendered *render.Result
	Policy   profile.Policy
	Clients  Clients
	// Scheduler evaluates placement; nil means PlanScheduler (installer/plan).
	Scheduler Scheduler
	// FieldManager for server-side dry-runs.
	FieldManager string
	// Recreated names objects ("Kind/name") the upgrade deletes and creates afresh instead of
	// patching (the Postgres StatefulSet of a major-version upgrade, whose claim template the
	// API server never lets change): the dry-run validates them as new objects.
	Recreated map[string]bool
	// SettleTime lets workloads-ready wait for rollouts to settle: right after Helm's wait
	// (which reads the new ReplicaSet) a Deployment's own status may still lag behind it.
	// Zero reports the state as it is (a plain `check`).
	SettleTime time.Duration
	// TakeOverFrom is a release whose ownership of the polyaxon.com CRDs is expected: adopt
	// takes them from it after the checks (namespace/name; empty: none).
	TakeOverFrom string
	// Origin reads who made the deployed revision (release.Client.Origin); nil skips the
	// release-origin check.
	Origin func(context.Context) (release.Origin, error)
	// Deployed reads the deployed revision (release.Client.Deployed), whose run guards
	// check-run-guards compares with the cluster; nil skips it.
	Deployed func(context.Context) (*helmrelease.Release, error)

	once struct {
		version, nodes, ns, sched, values sync.Once
	}
	values        *chartvalues.Values
	valuesErr     error
	serverVersion *version.Info
	versionErr    error
	nodes         []corev1.Node
	nodesErr      error
	nsExists      bool
	nsErr         error
	sched         *SchedulingResult
	schedErr      error
}

// Docs anchors live in README.md under "Preflight checks".
func anchor(id string) string { return "check-" + id }

// Checks returns the pre-install/upgrade checks, in order. Fatal ones first: without an API
// server nothing else means anything.
func Checks(env *Env) []check.Check {
	if env.FieldManager == "" {
		env.FieldManager = "polyaxon-deploy"
	}
	if env.Scheduler == nil {
		env.Scheduler = PlanScheduler{}
	}
	// Offline policy checks first: they need no cluster, so a fatal kube-api failure does not hide them.
	checks := []check.Check{
		{ID: "gateway-replicas", Category: "policy", Description: "the gateway has the replicas the profile requires", Severity: check.Error,
			Hint: "set gateway.replicas to at least the profile's minimum, or use another profile",
			Run:  env.checkGatewayReplicas},
		{ID: "pod-security", Category: "policy", Description: "every pod passes the profile's Pod Security level", Severity: check.Error,
			Hint: "enable securityContext (securityContext.enabled=true) or fix the component named in the message",
			Run:  env.checkPodSecurity},
		{ID: "rbac-scope", Category: "policy", Description: "the runner's rights stay in the release's namespace", Severity: check.Warning,
			Hint: "set rbac.clusterScoped=false unless runs must start in other namespaces; if they must, review the ClusterRoles' rules with your cluster admin",
			Run:  env.checkRBACScope},
		{ID: "kube-api", Category: "cluster", Description: "the Kubernetes API is reachable", Severity: check.Fatal,
			Hint: "check --kubeconfig/--context (kubectl config get-contexts) and that the API server answers (kubectl version)",
			Run:  env.checkAPI},
		{ID: "kube-version", Category: "cluster", Description: "the Kubernetes version is supported by the chart", Severity: check.Error,
			Hint: "upgrade the cluster, or use an installer release whose chart supports this version",
			Run:  env.checkVersion},
		{ID: "release-state", Category: "release", Description: "the release is not stuck in a pending state", Severity: check.Error,
			Hint: "a previous run crashed mid-operation: run `polyaxon-deploy recover` to mark it failed and roll back",
			Run:  env.checkReleaseState},
		{ID: "rbac", Category: "permissions", Description: "you may create and update every kind the release contains", Severity: check.Error,
			Hint: "ask a cluster admin for these permissions (a RoleBinding in the namespace, and cluster-scoped ones for CRDs/namespaces), or use a context that has them",
			Run:  env.checkRBAC},
		{ID: "crd-ownership", Category: "permissions", Description: "polyaxon.com CRDs are not owned by another release", Severity: check.Error,
			Hint: "the CRDs belong to another Helm release: uninstalling it would delete every Polyaxon run; remove its meta.helm.sh annotations so the CRDs are shared, or install into that release",
			Run:  env.checkCRDOwnership},
		{ID: "dry-run", Category: "validation", Description: "the API server accepts every object (server-side dry-run)", Severity: check.Error,
			Hint: "fix the values named in the message; an admission webhook or policy may also reject objects (see its message)",
			Run:  env.checkDryRun},
		{ID: "runs-namespace", Category: "runs", Description: "runs go to a namespace that holds nothing of the platform's", Severity: check.Error,
			Hint: "set runs.namespace to a namespace of its own (the production profile's <namespace>-runs), not the release's and not one holding another release",
			Run:  env.checkRunsNamespace},
		{ID: "run-placement", Category: "runs", Description: "the API server places run pods per category and hardens them", Severity: check.Warning,
			Hint: "use Kubernetes 1.36 or later with admissionregistration.k8s.io/v1 served, and runs.admissionPolicies.enabled=true; until then set each run's own environment.nodeSelector/tolerations",
			Run:  env.checkRunPlacement},
		{ID: "postgres-operator", Category: "database", Description: "with postgresql.mode=cloudnativepg, CloudNativePG's Cluster is served and a supported operator runs", Severity: check.Error,
			Hint: postgresOperatorFix,
			Run:  env.checkPostgresOperator},
		{ID: "postgres-failover", Category: "database", Description: "a CloudNativePG database survives the loss of one node", Severity: check.Warning,
			Hint: postgresFailoverFix,
			Run:  env.checkPostgresFailover},
		{ID: "distributed-backends", Category: "runs", Description: "the custom resources of every enabled distributed backend are served", Severity: check.Error,
			Hint: "install the backend's operator (it brings its CRDs), or switch the backend off (operators.<name>=false)",
			Run:  env.checkDistributedBackends},
	}
	checks = append(checks, env.schedulingChecks()...)
	checks = append(checks,
		check.Check{ID: "gpu-capacity", Category: "scheduling", Description: "Ready nodes offer the GPUs the values ask for", Severity: check.Error,
			Hint: "add GPU nodes (with the device plugin running so they advertise nvidia.com/gpu), or change the node selector/tolerations of the GPU categories",
			Run:  env.checkGPU},
		check.Check{ID: "storage-class", Category: "storage", Description: "persistent volumes have a StorageClass", Severity: check.Error,
			Hint: "mark a StorageClass as default (storageclass.kubernetes.io/is-default-class=true) or set <component>.persistence.storageClass",
			Run:  env.checkStorageClass},
		check.Check{ID: "artifacts-store", Category: "storage", Description: "runs and the gateway can share the artifacts store", Severity: check.Error,
			Hint: sharedStoreFix,
			Run:  env.checkArtifactsStore},
		check.Check{ID: "artifacts-sharing", Category: "storage", Description: "with runs in a namespace of their own, the gateway's and the runs' claims are one store", Severity: check.Error,
			Hint: sharingFix,
			Run:  env.checkArtifactsSharing},
		check.Check{ID: "artifacts-bucket", Category: "storage", Description: "the artifacts store's bucket exists and takes the keys of its Secret", Severity: check.Error,
			Hint: artifactsBucketFix,
			Run:  env.checkArtifactsBucket},
		check.Check{ID: "backup-location", Category: "storage", Description: "the scheduled backups' bucket exists and takes the keys they are given", Severity: check.Error,
			Hint: backupLocationFix,
			Run:  env.checkBackupLocation},
		check.Check{ID: "ingress-class", Category: "network", Description: "the Ingress class exists", Severity: check.Error,
			Hint: "install an ingress controller, or set ingress.className to an existing IngressClass (kubectl get ingressclass)",
			Run:  env.checkIngressClass},
		check.Check{ID: "gateway-route", Category: "network", Description: "the HTTPRoute can attach to its Gateways", Severity: check.Error,
			Hint: gatewayRouteFix,
			Run:  env.checkGatewayRoute},
		check.Check{ID: "gateway-sources", Category: "network", Description: "only the ingress controller's namespace reaches the gateway from outside", Severity: check.Warning,
			Hint: gatewaySourcesFix,
			Run:  env.checkGatewaySources},
		check.Check{ID: "edge-secrets", Category: "network", Description: "the Secrets the authenticating edge reads exist, with their keys", Severity: check.Error,
			Hint: edgeSecretsFix,
			Run:  env.checkEdgeSecrets},
		check.Check{ID: "monitoring-crds", Category: "metrics", Description: "the cluster serves the Prometheus Operator kinds the release renders", Severity: check.Error,
			Hint: monitoringFix,
			Run:  env.checkMonitoringCRDs},
		check.Check{ID: "edge-exposure", Category: "network", Description: "whatever exposes the release outside the cluster goes through the authenticating edge", Severity: check.Warning,
			Hint: edgeExposedFix,
			Run:  env.checkEdgeExposure},
	)
	for i := range checks {
		checks[i].DocsAnchor = anchor(checks[i].ID)
	}
	return checks
}

// IDs returns the IDs of the checks Checks would return (for docs and --ignore validation).
func IDs() []string {
	var out []string
	for _, c := range Checks(&Env{}) {
		out = append(out, c.ID)
	}
	return out
}

func (e *Env) clientset() (kubernetes.Interface, error) {
	if e.Clients == nil {
		return nil, fmt.Errorf("no cluster configured")
	}
	return e.Clients.Clientset()
}

// version reads the server version once.
func (e *Env) version(ctx context.Context) (*version.Info, error) {
	e.once.version.Do(func() {
		cs, err := e.clientset()
		if err != nil {
			e.versionErr = err
			return
		}
		e.serverVersion, e.versionErr = serverVersion(ctx, cs)
	})
	return e.serverVersion, e.versionErr
}

// readyNodes lists nodes once and keeps the Ready, schedulable ones.
func (e *Env) readyNodes(ctx context.Context) ([]corev1.Node, error) {
	e.once.nodes.Do(func() {
		cs, err := e.clientset()
		if err != nil {
			e.nodesErr = err
			return
		}
		list, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			e.nodesErr = fmt.Errorf("listing nodes: %w", err)
			return
		}
		for _, n := range list.Items {
			if nodeReady(&n) && !n.Spec.Unschedulable {
				e.nodes = append(e.nodes, n)
			}
		}
	})
	return e.nodes, e.nodesErr
}

// namespaceExists reports whether the release namespace exists (once).
func (e *Env) namespaceExists(ctx context.Context) (bool, error) {
	e.once.ns.Do(func() {
		cs, err := e.clientset()
		if err != nil {
			e.nsErr = err
			return
		}
		_, err = cs.CoreV1().Namespaces().Get(ctx, e.Namespace, metav1.GetOptions{})
		switch {
		case err == nil:
			e.nsExists = true
		case isNotFound(err):
			e.nsExists = false
		default:
			e.nsErr = fmt.Errorf("reading namespace %s: %w", e.Namespace, err)
		}
	})
	return e.nsExists, e.nsErr
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// manifests are the objects Helm creates (hooks included; CRDs separately).
func (e *Env) manifests() []render.Manifest {
	if e.Rendered == nil {
		return nil
	}
	out := append([]render.Manifest(nil), e.Rendered.Manifests...)
	return append(out, e.Rendered.Hooks...)
}
