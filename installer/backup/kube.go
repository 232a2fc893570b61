package backup

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/contract"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/polyaxonversion"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/render"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/values"
)

// LabelComponent tells the release's components apart; the release's own labels come from the
// chart (render.Names).
const (
	LabelComponent = render.LabelComponent

	// PostgresContainer is the container of the chart's postgresql pod.
	PostgresContainer = "postgresql"
	// ReplicasAnnotation remembers replicas while a restore has a Deployment
	// scaled down, so an interrupted restore can be recovered.
	ReplicasAnnotation = "polyaxon-deploy/replicas-before-restore"
)

// Release is a deployed Helm release with its effective values.
type Release struct {
	Info   ReleaseInfo
	Values map[string]any // chart defaults coalesced with the user's values
	// Names are the release's object names and labels, from its own chart's helpers.
	Names render.Names
}

// LoadRelease reads the deployed revision of a Helm release from its
// storage (Secrets, else ConfigMaps) in namespace.
func LoadRelease(ctx context.Context, client kubernetes.Interface, namespace, name string) (*Release, error) {
	query := map[string]string{"name": name, "owner": "helm", "status": "deployed"}
	var rels []*release.Release
	var errs []error
	for _, d := range []driver.Driver{
		driver.NewSecrets(client.CoreV1().Secrets(namespace)),
		driver.NewConfigMaps(client.CoreV1().ConfigMaps(namespace)),
	} {
		r, err := d.Query(query)
		if err == nil && len(r) > 0 {
			rels = r
			break
		}
		if err != nil && !errors.Is(err, driver.ErrReleaseNotFound) {
			errs = append(errs, err)
		}
	}
	if len(rels) == 0 {
		return nil, fmt.Errorf("release %q in namespace %q: no deployed revision found: %w", name, namespace, errors.Join(append(errs, driver.ErrReleaseNotFound)...))
	}
	sort.Slice(rels, func(i, j int) bool { return rels[i].Version > rels[j].Version })
	rel := rels[0]
	out := &Release{Info: ReleaseInfo{Name: rel.Name, Namespace: rel.Namespace, Revision: rel.Version}}
	vals := map[string]any{}
	if rel.Chart != nil {
		if rel.Chart.Metadata != nil {
			out.Info.ChartVersion, out.Info.AppVersion = rel.Chart.Metadata.Version, polyaxonversion.Of(rel.Chart.Metadata, rel.Config)
		}
		v, err := chartutil.CoalesceValues(rel.Chart, rel.Config)
		if err != nil {
			return nil, fmt.Errorf("release %q: values: %w", name, err)
		}
		vals = v
	}
	out.Values = vals
	names, err := render.NamesOfRelease(rel)
	if err != nil {
		return nil, err
	}
	out.Names = names
	return out, nil
}

func str(vals map[string]any, path string) string {
	v, ok := values.Lookup(vals, path)
	if !ok || v == nil {
		return ""
	}
	return fmt.Sprint(v)
}

func boolDefault(vals map[string]any, path string, def bool) bool {
	v, ok := values.Lookup(vals, path)
	if !ok {
		return def
	}
	b, ok := v.(bool)
	if !ok {
		return def
	}
	return b
}

// ReleaseSecrets returns a SecretsFunc saving the release's Secrets as a
// Kubernetes v1 List that `kubectl apply -f` accepts (server-owned metadata
// stripped): the Secrets the chart labels, and those the user manages and names in the
// release's values (every `existingSecret`: secrets.existingSecret holds the platform's key).
// A named Secret that does not exist is left out (its component may be off).
func ReleaseSecrets(client kubernetes.Interface, rel *Release) SecretsFunc {
	namespace, names := rel.Info.Namespace, rel.Names
	return func(ctx context.Context) ([]byte, []string, error) {
		list, err := client.CoreV1().Secrets(namespace).List(ctx, metav1.ListOptions{LabelSelector: names.SelectorString()})
		if err != nil {
			return nil, nil, fmt.Errorf("listing Secrets of release %q in %q: %w", names.Release, namespace, err)
		}
		found := map[string]corev1.Secret{}
		for _, s := range list.Items {
			found[s.Name] = s
		}
		for _, ref := range ExistingSecrets(rel.Values) {
			if _, ok := found[ref.Name]; ok {
				continue
			}
			s, err := client.CoreV1().Secrets(namespace).Get(ctx, ref.Name, metav1.GetOptions{})
			if isNotFound(err) {
				continue
			}
			if err != nil {
				return nil, nil, fmt.Errorf("reading Secret %s/%s (named by %s): %w", namespace, ref.Name, ref.Path, err)
			}
			found[s.Name] = *s
		}
		items := make([]corev1.Secret, 0, len(found))
		for _, name := range slices.Sorted(maps.Keys(found)) {
			s := found[name]
			items = append(items, corev1.Secret{
				TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
				ObjectMeta: metav1.ObjectMeta{
					Name: s.Name, Namespace: s.Namespace, Labels: s.Labels, Annotations: s.Annotations,
				},
				Type: s.Type, Data: s.Data, Immutable: s.Immutable,
			})
		}
		doc := corev1.SecretList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "List"}, Items: items}
		b, err := json.MarshalIndent(doc, "", "  ")
		if err != nil {
			return nil, nil, err
		}
		return append(b, '\n'), slices.Sorted(maps.Keys(found)), nil
	}
}

// SecretRef is a Secret named in values, with the value's path.
type SecretRef struct{ Path, Name string }

// ExistingSecrets lists the Secrets the values name (every non-empty `existingSecret`, the
// chart's one spelling for a Secret the user manages), sorted by path.
func ExistingSecrets(vals map[string]any) []SecretRef {
	var out []SecretRef
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		for k, v := range m {
			p := k
			if prefix != "" {
				p = prefix + "." + k
			}
			switch t := v.(type) {
			case map[string]any:
				walk(p, t)
			case string:
				if k == "existingSecret" && t != "" {
					out = append(out, SecretRef{Path: p, Name: t})
				}
			}
		}
	}
	walk("", vals)
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// FindPostgresPod returns the running chart postgresql pod of a release.
func FindPostgresPod(ctx context.Context, client kubernetes.Interface, namespace string, names render.Names) (string, error) {
	sel := names.ComponentSelector("postgresql")
	pods, err := client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return "", fmt.Errorf("finding the postgresql pod (%s) in %q: %w", sel, namespace, err)
	}
	var running []string
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			running = append(running, p.Name)
		}
	}
	if len(running) == 0 {
		return "", fmt.Errorf("no running postgresql pod of release %q in %q (selector %s): is postgresql.enabled true and the StatefulSet up? (kubectl get pods -n %s -l %s)",
			names.Release, namespace, sel, namespace, sel)
	}
	sort.Strings(running) // <fullname>-postgresql-0 first
	return running[0], nil
}

// ReleaseScaler scales a release's database writers to zero: the Deployments of the chart's
// core components (declared once, in files/components.yaml; Postgres, RabbitMQ and Redis are
// dependencies and keep running).
type ReleaseScaler struct {
	Client    kubernetes.Interface
	Namespace string
	// Names select the release's objects (Release.Names).
	Names render.Names
	// Timeout bounds waiting for the writers' pods to be gone (default 5m).
	Timeout time.Duration
	// Poll is the interval of that wait (default 1s).
	Poll time.Duration
}

// selector selects the release's objects of components.
func (s *ReleaseScaler) selector(components []string) string {
	return s.Names.ComponentSelector(components...)
}

// ScaleDown scales the writers to zero, remembering their replicas (also in
// an annotation), and waits until their pods are gone.
func (s *ReleaseScaler) ScaleDown(ctx context.Context) (func(context.Context) error, error) {
	if len(s.Names.Selector) == 0 {
		return nil, fmt.Errorf("release %q: no labels to select its Deployments with", s.Names.Release)
	}
	deps := s.Client.AppsV1().Deployments(s.Namespace)
	core := s.selector(contract.EmbeddedComponents().Core)
	list, err := deps.List(ctx, metav1.ListOptions{LabelSelector: core})
	if err != nil {
		return nil, fmt.Errorf("listing Deployments (%s) in %q: %w", core, s.Namespace, err)
	}
	before := map[string]int32{}
	restore := func(ctx context.Context) error {
		var errs []error
		names := slices.Sorted(maps.Keys(before))
		for _, name := range names {
			errs = append(errs, s.scaleBack(ctx, name, before[name]))
		}
		return errors.Join(errs...)
	}
	var writers []string // the components of the Deployments scaled: their pods must go
	for _, d := range list.Items {
		writers = append(writers, d.Labels[LabelComponent])
		n := replicasOf(&d)
		if recorded, ok := RecordedReplicas(&d); ok && n == 0 {
			n = recorded // an earlier restore was interrupted: its record is the truth
		}
		before[d.Name] = n
		patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:"%d"}},"spec":{"replicas":0}}`, ReplicasAnnotation, n)
		if _, err := deps.Patch(ctx, d.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			return restore, fmt.Errorf("scaling Deployment %s/%s to 0: %w", s.Namespace, d.Name, err)
		}
	}
	timeout, poll := s.Timeout, s.Poll
	if timeout == 0 {
		timeout = 5 * time.Minute
	}
	if poll == 0 {
		poll = time.Second
	}
	if len(writers) == 0 {
		return restore, nil
	}
	var left []string
	err = wait.PollUntilContextTimeout(ctx, poll, timeout, true, func(ctx context.Context) (bool, error) {
		pods, err := s.Client.CoreV1().Pods(s.Namespace).List(ctx, metav1.ListOptions{LabelSelector: s.selector(writers)})
		if err != nil {
			return false, nil
		}
		left = left[:0]
		for _, p := range pods.Items {
			if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
				left = append(left, p.Name)
			}
		}
		return len(left) == 0, nil
	})
	if err != nil {
		return restore, fmt.Errorf("waiting for the database writers' pods to stop (still there: %s): %w", strings.Join(left, ", "), err)
	}
	return restore, nil
}

// RecordedReplicas are the replicas a restore recorded before scaling d down; ok is false
// when no restore has d scaled down.
func RecordedReplicas(d *appsv1.Deployment) (n int32, ok bool) {
	a, ok := d.Annotations[ReplicasAnnotation]
	if !ok {
		return 0, false
	}
	v, err := strconv.ParseInt(a, 10, 32)
	if err != nil {
		return 0, false
	}
	return int32(v), true
}

// ScaleBack brings every Deployment of the release that a restore left scaled down (it did
// not finish: killed, or its machine lost) back to the replicas it recorded, and returns
// "name: n" for each.
func (s *ReleaseScaler) ScaleBack(ctx context.Context) ([]string, error) {
	if len(s.Names.Selector) == 0 {
		return nil, nil // no release left to scale
	}
	deps := s.Client.AppsV1().Deployments(s.Namespace)
	list, err := deps.List(ctx, metav1.ListOptions{LabelSelector: s.Names.SelectorString()})
	if err != nil {
		return nil, fmt.Errorf("listing Deployments (%s) in %q: %w", s.Names.SelectorString(), s.Namespace, err)
	}
	var done []string
	var errs []error
	for _, d := range list.Items {
		n, ok := RecordedReplicas(&d)
		if !ok {
			continue
		}
		if err := s.scaleBack(ctx, d.Name, n); err != nil {
			errs = append(errs, err)
			continue
		}
		done = append(done, fmt.Sprintf("%s: %d", d.Name, n))
	}
	sort.Strings(done)
	return done, errors.Join(errs...)
}

// scaleBack sets a Deployment's replicas and drops the restore's record of them, in one patch.
func (s *ReleaseScaler) scaleBack(ctx context.Context, name string, n int32) error {
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:null}},"spec":{"replicas":%d}}`, ReplicasAnnotation, n)
	if _, err := s.Client.AppsV1().Deployments(s.Namespace).Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("Deployment %s/%s back to %d replicas: %w", s.Namespace, name, n, err)
	}
	return nil
}

func replicasOf(d *appsv1.Deployment) int32 {
	if d.Spec.Replicas == nil {
		return 1
	}
	return *d.Spec.Replicas
}

// ReleaseSecretPassword reads the database password from a Secret.
func ReleaseSecretPassword(ctx context.Context, client kubernetes.Interface, namespace, secret, key string) (string, error) {
	s, err := client.CoreV1().Secrets(namespace).Get(ctx, secret, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("reading the database password from Secret %s/%s: %w", namespace, secret, err)
	}
	v, ok := s.Data[key]
	if !ok {
		return "", fmt.Errorf("Secret %s/%s has no key %q for the database password", namespace, secret, key)
	}
	return string(v), nil
}

// DBSettings is where a release's database is, from its values.
type DBSettings struct {
	InCluster   bool
	Host        string
	Port        int
	User        string
	Database    string
	SecretName  string
	SecretKey   string
	SSLMode     string
	ClientImage string // postgres image for the external client pod
}

// DatabaseSettings reads the database location from a release's values.
func DatabaseSettings(names render.Names, values map[string]any) DBSettings {
	pg := names.Component("postgresql")
	tag := str(values, "postgresql.image.tag")
	if tag == "" {
		tag = "16"
	}
	d := DBSettings{
		InCluster:   boolDefault(values, "postgresql.enabled", true),
		SecretName:  pg,
		SecretKey:   "postgres-password",
		ClientImage: "postgres:" + tag,
		Port:        5432,
	}
	if d.InCluster {
		d.Host = pg
		d.User = orDefault(str(values, "postgresql.auth.username"), "polyaxon")
		d.Database = orDefault(str(values, "postgresql.auth.database"), "polyaxon")
		if s := str(values, "postgresql.auth.existingSecret"); s != "" {
			d.SecretName = s
		}
		return d
	}
	d.Host = str(values, "externalServices.postgresql.host")
	if p, err := strconv.Atoi(str(values, "externalServices.postgresql.port")); err == nil && p > 0 {
		d.Port = p
	}
	d.User = orDefault(str(values, "externalServices.postgresql.user"), "polyaxon")
	d.Database = orDefault(str(values, "externalServices.postgresql.database"), "polyaxon")
	if s := str(values, "externalServices.postgresql.existingSecret"); s != "" {
		d.SecretName = s
	}
	if k := str(values, "externalServices.postgresql.passwordKey"); k != "" {
		d.SecretKey = k
	}
	d.SSLMode = sslModeFrom(values)
	return d
}

// sslModeFrom picks sslmode from externalServices.postgresql.options, a map
// or a "key=value" string.
func sslModeFrom(vals map[string]any) string {
	v, ok := values.Lookup(vals, "externalServices.postgresql.options")
	if !ok || v == nil {
		return ""
	}
	if m, ok := v.(map[string]any); ok {
		return str(m, "sslmode")
	}
	for _, kv := range strings.FieldsFunc(fmt.Sprint(v), func(r rune) bool { return r == ' ' || r == '&' || r == ',' || r == '?' }) {
		if k, val, ok := strings.Cut(kv, "="); ok && k == "sslmode" {
			return val
		}
	}
	return ""
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// Kube is what ReleaseTarget needs to reach the cluster.
type Kube struct {
	Config *rest.Config
	Client kubernetes.Interface
	// Execer overrides exec through the API server (tests).
	Execer Execer
}

func (k Kube) execer() Execer {
	if k.Execer != nil {
		return k.Execer
	}
	return NewExecer(k.Config, k.Client)
}

// TargetOptions tune ReleaseTarget.
type TargetOptions struct {
	// Local runs the client programs on this machine (pg_dump --local).
	Local bool
	// LocalConn overrides fields of the connection used with Local (e.g. a
	// port-forwarded Host/Port). Its Password, when set, is used instead of
	// reading the release's Secret.
	LocalConn Conn
	// LocalBinDir is where the local client programs are (default $PATH).
	LocalBinDir string
	// ClientImage overrides the external client pod's image.
	ClientImage string
	// PodTimeout bounds the external client pod's life (default 2h) and
	// PodStartTimeout its start (default 3m).
	PodTimeout, PodStartTimeout time.Duration
}

// ReleaseTarget returns the Target reaching a release's database: the
// chart's postgresql pod, a short-lived client pod for an external database,
// or local client programs with TargetOptions.Local. Call cleanup when done
// (it deletes the client pod's Job).
func ReleaseTarget(ctx context.Context, k Kube, rel *Release, o TargetOptions) (t Target, cleanup func(context.Context) error, err error) {
	noop := func(context.Context) error { return nil }
	ns, name := rel.Info.Namespace, rel.Info.Name
	db := DatabaseSettings(rel.Names, rel.Values)
	if o.Local {
		conn := Conn{Host: db.Host, Port: db.Port, User: db.User, Database: db.Database, SSLMode: db.SSLMode}
		if db.InCluster {
			conn.Host = "127.0.0.1" // the service name does not resolve here: port-forward
		}
		lc := o.LocalConn
		conn.Host, conn.User, conn.Database, conn.SSLMode = orDefault(lc.Host, conn.Host), orDefault(lc.User, conn.User), orDefault(lc.Database, conn.Database), orDefault(lc.SSLMode, conn.SSLMode)
		if lc.Port != 0 {
			conn.Port = lc.Port
		}
		conn.Password = lc.Password
		if conn.Password == "" {
			if conn.Password, err = ReleaseSecretPassword(ctx, k.Client, ns, db.SecretName, db.SecretKey); err != nil {
				return nil, nil, err
			}
		}
		var lo []LocalOption
		if o.LocalBinDir != "" {
			lo = append(lo, WithLocalBinDir(o.LocalBinDir))
		}
		return NewLocalTarget(conn, lo...), noop, nil
	}
	if db.InCluster {
		pod, err := FindPostgresPod(ctx, k.Client, ns, rel.Names)
		if err != nil {
			return nil, nil, err
		}
		return NewPodTarget(k.execer(), ns, pod, PostgresContainer, SourceInCluster), noop, nil
	}
	if db.Host == "" {
		return nil, nil, fmt.Errorf("release %q: postgresql.enabled is false and externalServices.postgresql.host is empty: no database to reach", name)
	}
	if o.ClientImage != "" {
		db.ClientImage = o.ClientImage
	}
	return StartClientPod(ctx, k, ClientPodSpec{
		Namespace: ns, Names: rel.Names, DB: db,
		NodeSelector: nodeSelector(rel.Values), Tolerations: tolerations(rel.Values),
		Lifetime: o.PodTimeout, StartTimeout: o.PodStartTimeout,
	})
}

func nodeSelector(vals map[string]any) map[string]string {
	v, _ := values.Lookup(vals, "nodeSelectors.core")
	m, _ := v.(map[string]any)
	if len(m) == 0 {
		return nil
	}
	out := map[string]string{}
	for k, val := range m {
		out[k] = fmt.Sprint(val)
	}
	return out
}

func tolerations(vals map[string]any) []corev1.Toleration {
	v, ok := values.Lookup(vals, "tolerations.core")
	if !ok || v == nil {
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	var out []corev1.Toleration
	_ = json.Unmarshal(b, &out)
	return out
}

// isNotFound reports a Kubernetes NotFound error.
func isNotFound(err error) bool { return apierrors.IsNotFound(err) }
