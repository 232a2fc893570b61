package adopt

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/Masterminds/semver/v3"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	helmrelease "helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/releaseutil"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/polyaxonversion"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/release"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/upgrade"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/values"
)

// Facts of the official polyaxon/polyaxon chart 2.x and its Bitnami subcharts: names and keys
// its templates give the objects adopt reads.
const (
	officialChart   = "polyaxon"
	officialMajor   = 2
	postgresChart   = "postgresql"
	rabbitmqChart   = "rabbitmq"
	redisChart      = "redis"
	bitnamiPrimary  = "primary"
	bitnamiPGCntr   = "postgresql"
	keySecretKey    = "POLYAXON_SECRET_KEY"
	keyInternal     = "POLYAXON_SECRET_INTERNAL_TOKEN"
	keyAdmin        = "POLYAXON_ADMIN_PASSWORD"
	keyPGPassword   = "postgres-password"
	keyRabbitPass   = "rabbitmq-password"
	keyErlangCookie = "rabbitmq-erlang-cookie"
	keyRedisPass    = "redis-password"
)

// officialFullname is the official chart's prefix of object names: always <release>-polyaxon.
func officialFullname(rel string) string { return trunc63(rel + "-polyaxon") }

// bitnamiFullname is a Bitnami subchart's name for its objects: the release name when it
// already contains the chart's name, else <release>-<chart>.
func bitnamiFullname(rel, chart string) string {
	if strings.Contains(rel, chart) {
		return trunc63(rel)
	}
	return trunc63(rel + "-" + chart)
}

func trunc63(s string) string {
	if len(s) > 63 {
		s = s[:63]
	}
	return strings.TrimSuffix(s, "-")
}

// RefusedError is an old release adopt will not take, with what to do instead. Nothing was
// changed when it is returned.
type RefusedError struct {
	Reason string
	Fix    string
}

func (e *RefusedError) Error() string { return e.Reason + "; fix: " + e.Fix }

// Object names a Kubernetes object of the old release.
type Object struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
}

func (o Object) String() string { return o.Kind + "/" + o.Name }

// Old is a release of the official chart, as adopt reads it.
type Old struct {
	Name, Namespace          string
	Revision                 int
	ChartVersion, AppVersion string
	// Values are the user's values of the deployed revision (what `helm get values` shows);
	// Merged adds the chart's defaults; Defaults are its chart's alone (subcharts' included).
	Values, Merged, Defaults map[string]any
	// Revisions is how many revisions Helm keeps for it.
	Revisions int

	// Platform are its Deployments; Stateful its StatefulSets (Postgres, RabbitMQ, Redis).
	Platform, Stateful []Object
	// CRDs are the polyaxon.com CRDs its manifest renders (templates/crds).
	CRDs []string
	// Postgres is its in-cluster Bitnami PostgreSQL StatefulSet ("" with an external database).
	Postgres string
}

// Fullname is the prefix of the old release's own objects.
func (o *Old) Fullname() string { return officialFullname(o.Name) }

// KeptVersion is the Polyaxon version ours keeps of the old release: its appVersion when our
// chart supports it (polyaxon.version in a layer beneath the user's values), so that adopt
// moves the release and not yet its database schema; an upgrade moves the version when asked
// (`upgrade --set polyaxon.version=...`). ok is false when our chart does not support it:
// ours then runs the version its values give, and the migrate phase brings the schema there.
func KeptVersion(old *Old, ours *chart.Metadata) (version string, ok bool) {
	if old == nil || old.AppVersion == "" {
		return "", false
	}
	if supported, err := polyaxonversion.Supports(ours, old.AppVersion); err != nil || !supported {
		return "", false
	}
	return old.AppVersion, true
}

// VersionLayer is KeptVersion as a values file (nil when nothing is kept).
func VersionLayer(old *Old, ours *chart.Metadata) *values.File {
	v, ok := KeptVersion(old, ours)
	if !ok {
		return nil
	}
	return &values.File{
		Name:    fmt.Sprintf("the Polyaxon version of release %s/%s, kept by adopt", old.Namespace, old.Name),
		Content: "polyaxon:\n  version: " + strconv.Quote(v) + "\n",
	}
}

// inspect reads the deployed revision of the old release and refuses one adopt cannot take.
// Workloads an earlier adopt run stopped on purpose do not count as failing.
func inspect(ctx context.Context, kube kubernetes.Interface, old *release.Client, ours *release.Client, ourChartApp string) (*Old, error) {
	name, ns := old.Name(), old.Namespace()
	cur, err := current(ctx, old)
	if err != nil {
		return nil, err
	}
	if st := cur.Info.Status; st != helmrelease.StatusDeployed {
		return nil, &RefusedError{
			Reason: fmt.Sprintf("release %s/%s is %s (revision %d): it is failing already, and adopt must dump a database that serves", ns, name, st, cur.Version),
			Fix:    fmt.Sprintf("bring it back first (helm rollback %s -n %s, or helm upgrade), check that its pods are ready, then adopt", name, ns),
		}
	}
	if ours.Name() == name && ours.Namespace() == ns {
		return nil, &RefusedError{
			Reason: fmt.Sprintf("ours would be release %s in namespace %s, the old release's own name: Helm keeps one release per name and namespace", name, ns),
			Fix:    fmt.Sprintf("give ours another name with --release (e.g. --release %s-ce), or another namespace with -n", name),
		}
	}
	if err := refuseNewer(cur, ourChartApp); err != nil {
		return nil, err
	}
	o, err := oldOf(ctx, old, cur)
	if err != nil {
		return nil, err
	}
	if pg, _ := values.Lookup(o.Merged, "postgresql.enabled"); pg != false && o.Postgres == "" {
		return nil, &RefusedError{
			Reason: fmt.Sprintf("release %s/%s has postgresql.enabled but its manifest has no Bitnami PostgreSQL StatefulSet", ns, name),
			Fix:    "check `helm get manifest " + name + " -n " + ns + "`: adopt reads the official chart's in-cluster PostgreSQL",
		}
	}
	if bad, err := notReady(ctx, kube, o); err != nil {
		return nil, err
	} else if len(bad) > 0 {
		return nil, &RefusedError{
			Reason: fmt.Sprintf("release %s/%s is failing already: %s", ns, name, strings.Join(bad, "; ")),
			Fix:    fmt.Sprintf("make it serve first (kubectl -n %s get pods; kubectl -n %s describe ...), then adopt: a failing release cannot be stopped and brought back safely", ns, ns),
		}
	}
	if o.Postgres == "" {
		return nil, &RefusedError{
			Reason: fmt.Sprintf("release %s/%s uses an external database (postgresql.enabled=false): adopt moves an in-cluster database", ns, name),
			Fix:    fmt.Sprintf("nothing to move: install ours with `polyaxon-deploy install --from-official-values <its values>` (the externalServices carry over, the database stays where it is) and the same POLYAXON_SECRET_KEY (secrets.secretKey, from Secret %s-secret), then uninstall the old release", o.Fullname()),
		}
	}
	return o, nil
}

// current is the newest revision of a release of the official chart 2.x.
func current(ctx context.Context, old *release.Client) (*helmrelease.Release, error) {
	cur, err := old.Current(ctx)
	if errors.Is(err, release.ErrNotInstalled) {
		return nil, &RefusedError{
			Reason: fmt.Sprintf("no release %s in namespace %s", old.Name(), old.Namespace()),
			Fix:    "name the official chart's release with --from-release and its namespace with --from-namespace (helm list -A shows them)",
		}
	}
	if err != nil {
		return nil, err
	}
	if err := refuseChart(cur); err != nil {
		return nil, err
	}
	return cur, nil
}

// Identify reads the old release, refusing one that is not of the official chart 2.x, so its
// values can be converted (Inspect judges the rest).
func Identify(ctx context.Context, old *release.Client) (*Old, error) {
	cur, err := current(ctx, old)
	if err != nil {
		return nil, err
	}
	return oldOf(ctx, old, cur)
}

// oldOf reads what adopt needs of a revision of the old release.
func oldOf(ctx context.Context, old *release.Client, cur *helmrelease.Release) (*Old, error) {
	o := &Old{Name: cur.Name, Namespace: old.Namespace(), Revision: cur.Version, Values: cur.Config}
	if cur.Chart != nil && cur.Chart.Metadata != nil {
		o.ChartVersion, o.AppVersion = cur.Chart.Metadata.Version, cur.Chart.Metadata.AppVersion
	}
	if o.Values == nil {
		o.Values = map[string]any{}
	}
	merged, err := chartutil.CoalesceValues(cur.Chart, cur.Config)
	if err != nil {
		return nil, fmt.Errorf("release %s/%s: values: %w", o.Namespace, o.Name, err)
	}
	o.Merged = merged
	if o.Defaults, err = chartutil.CoalesceValues(cur.Chart, map[string]any{}); err != nil {
		return nil, fmt.Errorf("release %s/%s: its chart's values: %w", o.Namespace, o.Name, err)
	}
	if h, err := old.History(ctx, 0); err == nil {
		o.Revisions = len(h)
	}
	if err := o.readManifest(cur.Manifest); err != nil {
		return nil, err
	}
	return o, nil
}

// readOld reads the old release without judging it (undo needs it as it is).
func readOld(ctx context.Context, old *release.Client) (*Old, error) {
	cur, err := old.Current(ctx)
	if err != nil {
		return nil, fmt.Errorf("release %s/%s: %w", old.Namespace(), old.Name(), err)
	}
	return oldOf(ctx, old, cur)
}

// refuseChart refuses a release of another chart, of ours, or of a major version the
// conversion table was not written for.
func refuseChart(r *helmrelease.Release) error {
	if r.Chart == nil || r.Chart.Metadata == nil {
		return &RefusedError{Reason: fmt.Sprintf("release %s has no chart metadata", r.Name), Fix: "check it with `helm status " + r.Name + "`"}
	}
	md := r.Chart.Metadata
	if md.Name != officialChart {
		return &RefusedError{
			Reason: fmt.Sprintf("release %s runs chart %s %s, not Polyaxon's (polyaxon/polyaxon)", r.Name, md.Name, md.Version),
			Fix:    "name the release of the official Polyaxon chart with --from-release (helm list -A shows each release's chart)",
		}
	}
	if _, ours := md.Annotations[upgrade.UpgradeFromAnnotation]; ours {
		return &RefusedError{
			Reason: fmt.Sprintf("release %s already runs this project's chart (%s)", r.Name, md.Version),
			Fix:    "there is nothing to adopt: `polyaxon-deploy upgrade --release " + r.Name + "` manages it",
		}
	}
	v, err := semver.NewVersion(md.Version)
	if err != nil || v.Major() != officialMajor {
		return &RefusedError{
			Reason: fmt.Sprintf("release %s runs the official chart %s; adopt reads the values and objects of the official chart %d.x only", r.Name, md.Version, officialMajor),
			Fix:    fmt.Sprintf("upgrade it with the official chart to its latest %d.x first (helm upgrade %s polyaxon/polyaxon --version '~%d'), which also migrates its database, then adopt", officialMajor, r.Name, officialMajor),
		}
	}
	common := officialFullname(r.Name) + "-secret"
	if !hasObject(r.Manifest, "Secret", common) {
		return &RefusedError{
			Reason: fmt.Sprintf("release %s runs a chart named polyaxon %s whose manifest has no Secret %s, which the official chart always renders", r.Name, md.Version, common),
			Fix:    "adopt takes releases of the official polyaxon/polyaxon chart only; move a modified chart by hand (backup, install, restore)",
		}
	}
	return nil
}

// refuseNewer refuses an old release whose Polyaxon is newer than ours: its schema went
// further than ours can run.
func refuseNewer(r *helmrelease.Release, ourApp string) error {
	theirs, err1 := semver.NewVersion(r.Chart.Metadata.AppVersion)
	mine, err2 := semver.NewVersion(ourApp)
	if err1 != nil || err2 != nil || !theirs.GreaterThan(mine) {
		return nil
	}
	return &RefusedError{
		Reason: fmt.Sprintf("release %s runs Polyaxon %s, newer than ours (%s): its database was migrated further than %s can run", r.Name, theirs, mine, mine),
		Fix:    fmt.Sprintf("use a polyaxon-deploy whose chart runs Polyaxon %s or later (--chart with a newer chart)", theirs),
	}
}

// manifestObject is what adopt reads of each object of the old manifest.
type manifestObject struct {
	Kind     string `json:"kind"`
	Metadata struct {
		Name   string            `json:"name"`
		Labels map[string]string `json:"labels"`
	} `json:"metadata"`
}

// manifestObjects reads kind, name and labels of each object of a release manifest.
func manifestObjects(manifest string) []manifestObject {
	var out []manifestObject
	for _, doc := range releaseutil.SplitManifests(manifest) {
		var m manifestObject
		if err := yaml.Unmarshal([]byte(doc), &m); err == nil && m.Kind != "" {
			out = append(out, m)
		}
	}
	return out
}

func hasObject(manifest, kind, name string) bool {
	for _, m := range manifestObjects(manifest) {
		if m.Kind == kind && m.Metadata.Name == name {
			return true
		}
	}
	return false
}

func (o *Old) readManifest(manifest string) error {
	for _, m := range manifestObjects(manifest) {
		switch m.Kind {
		case "Deployment":
			o.Platform = append(o.Platform, Object{Kind: m.Kind, Name: m.Metadata.Name})
		case "StatefulSet":
			o.Stateful = append(o.Stateful, Object{Kind: m.Kind, Name: m.Metadata.Name})
			l := m.Metadata.Labels
			if l["app.kubernetes.io/name"] == postgresChart && l["app.kubernetes.io/component"] == bitnamiPrimary {
				o.Postgres = m.Metadata.Name
			}
		case "CustomResourceDefinition":
			if strings.HasSuffix(m.Metadata.Name, ".polyaxon.com") {
				o.CRDs = append(o.CRDs, m.Metadata.Name)
			}
		}
	}
	sort.Strings(o.CRDs)
	return nil
}

// notReady lists the old release's workloads that do not serve, leaving out those an earlier
// adopt run stopped on purpose.
func notReady(ctx context.Context, kube kubernetes.Interface, o *Old) ([]string, error) {
	var bad []string
	for _, w := range append(append([]Object{}, o.Platform...), o.Stateful...) {
		want, ready, ann, err := replicasOf(ctx, kube, o.Namespace, w)
		if apierrors.IsNotFound(err) {
			bad = append(bad, w.String()+" is missing")
			continue
		}
		if err != nil {
			return nil, err
		}
		if _, stopped := ann[ReplicasAnnotation]; stopped {
			continue
		}
		if ready < want {
			bad = append(bad, fmt.Sprintf("%s has %d/%d ready", w, ready, want))
		}
	}
	return bad, nil
}

// replicasOf reads a workload's desired and ready replicas and its annotations.
func replicasOf(ctx context.Context, kube kubernetes.Interface, ns string, w Object) (want, ready int32, ann map[string]string, err error) {
	switch w.Kind {
	case "Deployment":
		var d *appsv1.Deployment
		if d, err = kube.AppsV1().Deployments(ns).Get(ctx, w.Name, metav1.GetOptions{}); err != nil {
			return
		}
		return deref(d.Spec.Replicas), d.Status.AvailableReplicas, d.Annotations, nil
	default:
		var s *appsv1.StatefulSet
		if s, err = kube.AppsV1().StatefulSets(ns).Get(ctx, w.Name, metav1.GetOptions{}); err != nil {
			return
		}
		return deref(s.Spec.Replicas), s.Status.ReadyReplicas, s.Annotations, nil
	}
}

func deref(p *int32) int32 {
	if p == nil {
		return 1
	}
	return *p
}

// postgresPod returns the running pod of the old release's Postgres StatefulSet.
func postgresPod(ctx context.Context, kube kubernetes.Interface, o *Old) (string, error) {
	sts, err := kube.AppsV1().StatefulSets(o.Namespace).Get(ctx, o.Postgres, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("the old release's PostgreSQL StatefulSet %s/%s: %w", o.Namespace, o.Postgres, err)
	}
	sel := labels.SelectorFromSet(sts.Spec.Selector.MatchLabels).String()
	pods, err := kube.CoreV1().Pods(o.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return "", err
	}
	var running []string
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			running = append(running, p.Name)
		}
	}
	if len(running) == 0 {
		return "", fmt.Errorf("no running pod of the old PostgreSQL StatefulSet %s/%s (selector %s)", o.Namespace, o.Postgres, sel)
	}
	sort.Strings(running)
	return running[0], nil
}
