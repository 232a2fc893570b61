package preflight

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/backup"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/check"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/guards"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/release"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/render"
)

// checkOrigin warns when the deployed revision was made outside polyaxon-deploy: the next
// upgrade would replay older inputs over it.
func (e *Env) checkOrigin(ctx context.Context) (string, error) {
	if e.Origin == nil {
		return "", check.Skip("the release's history is not read by this command")
	}
	o, err := e.Origin(ctx)
	if errors.Is(err, release.ErrNotInstalled) {
		return "", check.Skip("no release")
	}
	if err != nil {
		return "", err
	}
	if o.Outside() {
		return "", check.Warnf("%s; an upgrade replays the stored inputs and would revert its values", o)
	}
	return o.String(), nil
}

// PostChecks verify an installed release (`check` without --pre): the API, the version, the
// release record, who made the deployed revision, the guards that keep runs apart, the
// gateway's proxy in front of haupt, the edge's Secrets, a CloudNativePG database's health and
// the readiness of every workload.
func PostChecks(env *Env) []check.Check {
	all := Checks(env)
	var checks []check.Check
	var edgeSecrets check.Check
	for _, c := range all {
		switch c.ID {
		case "kube-api", "kube-version":
			checks = append(checks, c)
		case "postgres-failover":
			checks = append(checks, c)
		case "edge-secrets":
			// After the install too: a Secret changed since is why the edge's pods are not ready.
			edgeSecrets = c
		}
	}
	checks = append(checks,
		check.Check{ID: "release-deployed", Category: "release", Description: "the release is installed and deployed", Severity: check.Fatal,
			Hint: "install it (polyaxon-deploy install), or pass the right --release/-n; a failed release: polyaxon-deploy rollback",
			Run:  env.checkDeployed},
		check.Check{ID: "release-origin", Category: "release", Description: "polyaxon-deploy made the deployed revision", Severity: check.Warning,
			Hint: "`polyaxon-deploy upgrade --keep-release-values` keeps that revision's values; without it, the upgrade lists the values it would revert and asks",
			Run:  env.checkOrigin},
		check.Check{ID: "run-guards", Category: "runs", Description: "the objects that keep runs apart (admission policies and bindings, NetworkPolicies, RBAC, quota, the runs' namespace's Pod Security labels) are as the release has them, and nothing beside them widens access", Severity: check.Error,
			Hint: "`polyaxon-deploy recover` puts them back as the deployed revision has them (so does the next upgrade); an extra NetworkPolicy or binding it leaves: delete it",
			Run:  env.checkRunGuards},
		check.Check{ID: "gateway-proxy", Category: "network", Description: "nginx is what the gateway's Service reaches, and haupt listens on the pod's loopback only", Severity: check.Error,
			Hint: gatewayProxyFix,
			Run:  env.checkGatewayProxy},
		check.Check{ID: "gateway-route-status", Category: "network", Description: "the Gateways' controller accepted the HTTPRoute and resolved its backend", Severity: check.Error,
			Hint: "kubectl -n NAMESPACE describe httproute shows each Gateway's conditions; fix the Gateway's listener or the route's backend it names",
			Run:  env.checkGatewayRouteStatus},
		edgeSecrets,
		check.Check{ID: "scheduled-backups", Category: "backup", Description: "the scheduled backup (backup.schedule) last succeeded", Severity: check.Error,
			Hint: scheduledBackupsFix,
			Run:  env.checkScheduledBackups},
		check.Check{ID: "postgres-cluster", Category: "database", Description: "the CloudNativePG Cluster is healthy, every instance ready, with one primary", Severity: check.Error,
			Hint: postgresClusterFix,
			Run:  env.checkPostgresCluster},
		check.Check{ID: "workloads-ready", Category: "release", Description: "every Deployment and StatefulSet of the release is ready", Severity: check.Error,
			Hint: "kubectl -n NAMESPACE describe pods -l app.kubernetes.io/instance=RELEASE shows why pods are not ready",
			Run:  env.checkWorkloadsReady},
	)
	for i := range checks {
		checks[i].DocsAnchor = anchor(checks[i].ID)
	}
	return checks
}

func (e *Env) checkDeployed(ctx context.Context) (string, error) {
	cs, err := e.clientset()
	if err != nil {
		return "", err
	}
	list, err := cs.CoreV1().Secrets(e.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "owner=helm,name=" + e.Release})
	if err != nil {
		return "", fmt.Errorf("listing Helm release records in %s: %w", e.Namespace, err)
	}
	if len(list.Items) == 0 {
		return "", fmt.Errorf("no release %s in namespace %s", e.Release, e.Namespace)
	}
	best, status := -1, ""
	for _, s := range list.Items {
		n, _ := strconv.Atoi(s.Labels["version"])
		if n > best {
			best, status = n, s.Labels["status"]
		}
	}
	if status != "deployed" {
		return "", fmt.Errorf("release %s revision %d is %s", e.Release, best, status)
	}
	return fmt.Sprintf("release %s revision %d deployed", e.Release, best), nil
}

// checkWorkloadsReady polls for up to SettleTime before reporting workloads not ready.
func (e *Env) checkWorkloadsReady(ctx context.Context) (string, error) {
	return settle(ctx, e.SettleTime, 500*time.Millisecond, e.workloadsReadyOnce)
}

// settle runs once every interval until it succeeds, wait has passed or ctx ends, and returns
// its last result: what a post-check reads while a rollout may still be under way.
func settle(ctx context.Context, wait, interval time.Duration, once func(context.Context) (string, error)) (string, error) {
	deadline := time.Now().Add(wait)
	for {
		detail, err := once(ctx)
		if err == nil || time.Now().After(deadline) || ctx.Err() != nil {
			return detail, err
		}
		select {
		case <-ctx.Done():
			return detail, err
		case <-time.After(interval):
		}
	}
}

func (e *Env) workloadsReadyOnce(ctx context.Context) (string, error) {
	cs, err := e.clientset()
	if err != nil {
		return "", err
	}
	// The deployed revision's own chart says which labels its workloads carry.
	rel, err := backup.LoadRelease(ctx, cs, e.Namespace, e.Release)
	if err != nil {
		return "", err
	}
	sel := metav1.ListOptions{LabelSelector: rel.Names.SelectorString()}
	deps, err := cs.AppsV1().Deployments(e.Namespace).List(ctx, sel)
	if err != nil {
		return "", fmt.Errorf("listing Deployments: %w", err)
	}
	sts, err := cs.AppsV1().StatefulSets(e.Namespace).List(ctx, sel)
	if err != nil {
		return "", fmt.Errorf("listing StatefulSets: %w", err)
	}
	var notReady []string
	n := 0
	for _, d := range deps.Items {
		n++
		want := int32(1)
		if d.Spec.Replicas != nil {
			want = *d.Spec.Replicas
		}
		if recorded, ok := backup.RecordedReplicas(&d); ok && recorded > want {
			notReady = append(notReady, fmt.Sprintf("Deployment %s: %d/%d replicas, scaled down from %d by a restore that did not finish (polyaxon-deploy recover scales it back)",
				d.Name, want, recorded, recorded))
			continue
		}
		if d.Status.ObservedGeneration < d.Generation || d.Status.UpdatedReplicas < want || d.Status.AvailableReplicas < want {
			notReady = append(notReady, fmt.Sprintf("Deployment %s: %d/%d available, %d updated", d.Name, d.Status.AvailableReplicas, want, d.Status.UpdatedReplicas))
		}
	}
	for _, s := range sts.Items {
		n++
		want := int32(1)
		if s.Spec.Replicas != nil {
			want = *s.Spec.Replicas
		}
		if s.Status.ObservedGeneration < s.Generation || s.Status.ReadyReplicas < want || (s.Status.UpdateRevision != "" && s.Status.CurrentRevision != s.Status.UpdateRevision) {
			notReady = append(notReady, fmt.Sprintf("StatefulSet %s: %d/%d ready", s.Name, s.Status.ReadyReplicas, want))
		}
	}
	if n == 0 {
		return "", fmt.Errorf("no Deployment or StatefulSet of release %s in %s", e.Release, e.Namespace)
	}
	if len(notReady) > 0 {
		sort.Strings(notReady)
		return "", joinErrs(notReady, 20)
	}
	return fmt.Sprintf("%d workloads ready", n), nil
}

// checkRunGuards fails when a guard of the deployed revision (installer/guards) is missing or
// changed (a deleted binding turns its policy off without a word from the API server), or when
// an object beside them that the revision does not render widens what they allow.
func (e *Env) checkRunGuards(ctx context.Context) (string, error) {
	if e.Deployed == nil {
		return "", check.Skip("the release's history is not read by this command")
	}
	rev, err := e.Deployed(ctx)
	if errors.Is(err, release.ErrNotInstalled) || (err == nil && rev == nil) {
		return "", check.Skip("no deployed revision")
	}
	if err != nil {
		return "", err
	}
	g, err := e.guards()
	if err != nil {
		return "", err
	}
	rendered, err := render.Released(rev)
	if err != nil {
		return "", err
	}
	want := guards.Of(rendered, e.Namespace)
	if len(want.Objects) == 0 {
		return "", check.Skip(fmt.Sprintf("revision %d has no run guards", rev.Version))
	}
	drifts, err := g.Compare(ctx, want.Objects)
	if err != nil {
		return "", err
	}
	extras, err := g.Extra(ctx, want)
	if err != nil {
		return "", err
	}
	var msg []string
	if len(drifts) > 0 {
		names := make([]string, len(drifts))
		for i, d := range drifts {
			names[i] = d.String()
		}
		msg = append(msg, fmt.Sprintf("%s: runs are not held as revision %d holds them; `polyaxon-deploy recover` puts them back", strings.Join(names, ", "), rev.Version))
	}
	if len(extras) > 0 {
		names, deletes := make([]string, len(extras)), make([]string, len(extras))
		for i, x := range extras {
			names[i], deletes[i] = x.String(), x.Delete()
		}
		msg = append(msg, fmt.Sprintf("%s: delete them if nothing needs them (`recover` leaves them): %s", strings.Join(names, "; "), strings.Join(deletes, "; ")))
	}
	if len(msg) > 0 {
		return "", errors.New(strings.Join(msg, "; "))
	}
	return fmt.Sprintf("%d guards as revision %d has them, and no NetworkPolicy or binding beside them that widens access", len(want.Objects), rev.Version), nil
}

// guards reaches the cluster's guards through the check's clients.
func (e *Env) guards() (guards.Client, error) {
	dyn, err := e.Clients.Dynamic()
	if err != nil {
		return guards.Client{}, err
	}
	mapper, err := e.Clients.RESTMapper()
	if err != nil {
		return guards.Client{}, err
	}
	return guards.Client{Dynamic: dyn, Mapper: mapper, FieldManager: e.FieldManager}, nil
}
