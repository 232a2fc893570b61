package backup

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/polyaxon-deploy/polyaxon-deploy/charts"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/chartvalues"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/contract"
	rt "github.com/polyaxon-deploy/polyaxon-deploy/installer/release/releasetest"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/render"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// labels are the chart's labels of a component's objects in release.
func labels(release, component string) map[string]string {
	return map[string]string{"app.kubernetes.io/name": "polyaxon", "app.kubernetes.io/instance": release, LabelComponent: component}
}

func deployment(name, release, component string, replicas int32) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: labels(release, component)},
		Spec:       appsv1.DeploymentSpec{Replicas: &replicas},
	}
}

func TestReleaseScaler(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset(
		deployment("polyaxon-gateway", "polyaxon", "gateway", 2),
		deployment("polyaxon-worker", "polyaxon", "worker", 3),
		deployment("polyaxon-streams", "polyaxon", "streams", 1),   // not a writer
		deployment("other-gateway", "other", "gateway", 1),         // other release
		deployment("polyaxon-operator", "polyaxon", "operator", 0), // already at zero
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "polyaxon-gateway-abc", Namespace: "ns", Labels: labels("polyaxon", "gateway")},
			Status: corev1.PodStatus{Phase: corev1.PodRunning}},
	)
	// Stand-in for the Deployment controller: the pod goes once scaled down.
	go func() {
		for i := 0; i < 100; i++ {
			d, _ := client.AppsV1().Deployments("ns").Get(ctx, "polyaxon-gateway", metav1.GetOptions{})
			if d != nil && *d.Spec.Replicas == 0 {
				_ = client.CoreV1().Pods("ns").Delete(ctx, "polyaxon-gateway-abc", metav1.DeleteOptions{})
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	s := &ReleaseScaler{Client: client, Namespace: "ns", Names: rt.ChartNames(t, "polyaxon", nil), Poll: 10 * time.Millisecond, Timeout: 5 * time.Second}
	back, err := s.ScaleDown(ctx)
	require.NoError(t, err)
	replicas := func(name string) (int32, string) {
		d, err := client.AppsV1().Deployments("ns").Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		return *d.Spec.Replicas, d.Annotations[ReplicasAnnotation]
	}
	for name, was := range map[string]string{"polyaxon-gateway": "2", "polyaxon-worker": "3", "polyaxon-operator": "0"} {
		n, ann := replicas(name)
		assert.Zero(t, n, name)
		assert.Equal(t, was, ann, name)
	}
	n, _ := replicas("polyaxon-streams")
	assert.Equal(t, int32(1), n)
	n, _ = replicas("other-gateway")
	assert.Equal(t, int32(1), n)

	// An interrupted restore is recovered from the annotation.
	back2, err := (&ReleaseScaler{Client: client, Namespace: "ns", Names: rt.ChartNames(t, "polyaxon", nil), Poll: 10 * time.Millisecond}).ScaleDown(ctx)
	require.NoError(t, err)
	require.NoError(t, back2(ctx))
	require.NoError(t, back(ctx))
	for name, want := range map[string]int32{"polyaxon-gateway": 2, "polyaxon-worker": 3, "polyaxon-operator": 0} {
		n, ann := replicas(name)
		assert.Equal(t, want, n, name)
		assert.Empty(t, ann, name)
	}
}

// After a Helm apply (a database move), a Deployment the apply scaled keeps its manifest's
// replicas; one it left at zero goes back to its record; both lose the record.
func TestReleaseScalerScaleBackUnlessSet(t *testing.T) {
	ctx := context.Background()
	scaled := deployment("polyaxon-worker", "polyaxon", "worker", 4) // the apply's --set worker.replicas=4
	scaled.Annotations = map[string]string{ReplicasAnnotation: "3"}
	left := deployment("polyaxon-gateway", "polyaxon", "gateway", 0)
	left.Annotations = map[string]string{ReplicasAnnotation: "2"}
	client := fake.NewClientset(scaled, left, deployment("polyaxon-streams", "polyaxon", "streams", 1))
	s := &ReleaseScaler{Client: client, Namespace: "ns", Names: rt.ChartNames(t, "polyaxon", nil)}
	done, err := s.ScaleBackUnlessSet(ctx)
	require.NoError(t, err)
	assert.Equal(t, []string{"polyaxon-gateway: 2", "polyaxon-worker: 4"}, done)
	for name, want := range map[string]int32{"polyaxon-worker": 4, "polyaxon-gateway": 2, "polyaxon-streams": 1} {
		d, err := client.AppsV1().Deployments("ns").Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, want, *d.Spec.Replicas, name)
		assert.Empty(t, d.Annotations[ReplicasAnnotation], name)
	}
}

func TestReleaseScalerTimeout(t *testing.T) {
	client := fake.NewClientset(
		deployment("polyaxon-gateway", "polyaxon", "gateway", 1),
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "stuck", Namespace: "ns", Labels: labels("polyaxon", "gateway")},
			Status: corev1.PodStatus{Phase: corev1.PodRunning}},
	)
	s := &ReleaseScaler{Client: client, Namespace: "ns", Names: rt.ChartNames(t, "polyaxon", nil), Poll: 10 * time.Millisecond, Timeout: 100 * time.Millisecond}
	back, err := s.ScaleDown(context.Background())
	require.ErrorContains(t, err, "still there: stuck")
	require.NotNil(t, back)
	require.NoError(t, back(context.Background()))
}

// The backup saves the Secrets the chart labels, found by the release's own labels (here with
// nameOverride), and the Secrets the user names in the values (secrets.existingSecret).
func TestReleaseSecrets(t *testing.T) {
	vals := map[string]any{"nameOverride": "platform", "secrets": map[string]any{"existingSecret": "my-keys"},
		"rabbitmq": map[string]any{"auth": map[string]any{"existingSecret": "absent"}}}
	names := rt.ChartNames(t, "ml", vals)
	own := func(component string) map[string]string {
		return map[string]string{"app.kubernetes.io/name": "platform", "app.kubernetes.io/instance": "ml", LabelComponent: component}
	}
	client := fake.NewClientset(
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "ml-platform-postgresql", Namespace: "ns", Labels: own("postgresql"),
			ResourceVersion: "42", UID: "u1"}, Data: map[string][]byte{"postgres-password": []byte("p")}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "my-keys", Namespace: "ns"}, Data: map[string][]byte{"POLYAXON_SECRET_KEY": []byte("k")}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "unrelated", Namespace: "ns"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "ml-polyaxon-platform", Namespace: "ns", Labels: labels("ml", "platform")}},
	)
	rel := &Release{Info: ReleaseInfo{Name: "ml", Namespace: "ns"}, Names: names, Values: vals}
	doc, saved, err := ReleaseSecrets(client, rel)(context.Background())
	require.NoError(t, err)
	assert.Equal(t, []string{"ml-platform-postgresql", "my-keys"}, saved)
	var list corev1.SecretList
	require.NoError(t, json.Unmarshal(doc, &list))
	assert.Equal(t, "List", list.Kind)
	require.Len(t, list.Items, 2)
	assert.Equal(t, "Secret", list.Items[0].Kind)
	assert.Empty(t, list.Items[0].ResourceVersion)
	assert.Empty(t, list.Items[0].UID)
	assert.Equal(t, []byte("k"), list.Items[1].Data["POLYAXON_SECRET_KEY"])

	assert.Equal(t, []SecretRef{{"rabbitmq.auth.existingSecret", "absent"}, {"secrets.existingSecret", "my-keys"}}, ExistingSecrets(vals))
}

// typedValues is vals as the installer reads them (over the chart's defaults).
func typedValues(t *testing.T, vals map[string]any) *chartvalues.Values {
	t.Helper()
	v, err := chartvalues.Of(vals)
	require.NoError(t, err)
	return v
}

// The database's place comes from the release's values, its defaults from the chart's own
// values.yaml (the client image's tag is the chart's PostgreSQL tag).
func TestDatabaseSettings(t *testing.T) {
	in := DatabaseSettings(rt.ChartNames(t, "prod", nil), typedValues(t, nil))
	assert.Equal(t, DBSettings{InCluster: true, Where: "statefulset", Host: "prod-polyaxon-postgresql", Port: 5432, User: "polyaxon", Database: "polyaxon",
		SecretName: "prod-polyaxon-postgresql", SecretKey: "postgres-password", ClientImage: "postgres:16.4"}, in)

	ext := DatabaseSettings(rt.ChartNames(t, "polyaxon", nil), typedValues(t, map[string]any{
		"postgresql": map[string]any{"enabled": false, "image": map[string]any{"tag": "17"}},
		"externalServices": map[string]any{"postgresql": map[string]any{
			"host": "db.example.com", "port": 6432, "user": "px", "database": "pxdb",
			"existingSecret": "db-creds", "passwordKey": "pw", "options": map[string]any{"sslmode": "require"},
		}},
	}))
	assert.Equal(t, DBSettings{Where: "external", Host: "db.example.com", Port: 6432, User: "px", Database: "pxdb",
		SecretName: "db-creds", SecretKey: "pw", SSLMode: "require", ClientImage: "postgres:17"}, ext)

	over := map[string]any{"nameOverride": "platform", "fullnameOverride": "core"}
	in = DatabaseSettings(rt.ChartNames(t, "ml", over), typedValues(t, over))
	assert.Equal(t, "core-postgresql", in.Host, "the Service the chart names")
	assert.Equal(t, "core-postgresql", in.SecretName)

	// A CloudNativePG Cluster is reached through the operator's read-write Service, as the
	// owner whose password is in the Secret the Cluster was bootstrapped from.
	cnpg := map[string]any{"postgresql": map[string]any{"mode": "cloudnativepg"}}
	in = DatabaseSettings(rt.ChartNames(t, "prod", cnpg), typedValues(t, cnpg))
	assert.Equal(t, DBSettings{InCluster: true, Where: "cloudnativepg", Host: "prod-polyaxon-postgresql-rw", Port: 5432, User: "polyaxon", Database: "polyaxon",
		SecretName: "prod-polyaxon-postgresql-auth", SecretKey: "password", ClientImage: "ghcr.io/cloudnative-pg/postgresql:16.4", ClientUID: 26}, in)
}

func TestClientJob(t *testing.T) {
	j := ClientJob(ClientPodSpec{Namespace: "ns", Names: rt.ChartNames(t, "polyaxon", nil), DB: DBSettings{Host: "db", Port: 5432, User: "u", Database: "d",
		SecretName: "s", SecretKey: "k", ClientImage: "postgres:16"}, Lifetime: time.Hour}, "polyaxon-db-client-abc")
	c := j.Spec.Template.Spec.Containers[0]
	assert.Equal(t, PostgresContainer, c.Name)
	assert.Equal(t, []string{"sleep", "3600"}, c.Command)
	env := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		env[e.Name] = e
	}
	assert.Equal(t, "db", env["PGHOST"].Value)
	assert.Equal(t, "u", env["POSTGRES_USER"].Value)
	assert.Equal(t, "d", env["POSTGRES_DB"].Value)
	assert.Empty(t, env["POSTGRES_PASSWORD"].Value, "password only by reference")
	assert.Equal(t, "s", env["POSTGRES_PASSWORD"].ValueFrom.SecretKeyRef.Name)
	assert.Equal(t, "k", env["POSTGRES_PASSWORD"].ValueFrom.SecretKeyRef.Key)
	assert.Equal(t, int64(3600), *j.Spec.ActiveDeadlineSeconds)
	assert.True(t, *j.Spec.Template.Spec.SecurityContext.RunAsNonRoot)
}

func TestStartClientPod(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset()
	// Stand-in for the Job controller and kubelet: a running pod per Job.
	client.PrependReactor("create", "jobs", func(a k8stesting.Action) (bool, runtime.Object, error) {
		job := a.(k8stesting.CreateAction).GetObject().(interface{ GetName() string })
		err := client.Tracker().Create(corev1.SchemeGroupVersion.WithResource("pods"), &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: job.GetName() + "-x", Namespace: "ns", Labels: map[string]string{"job-name": job.GetName()}},
			Status:     corev1.PodStatus{Phase: corev1.PodRunning},
		}, "ns")
		return false, nil, err
	})
	ex := &localExecer{}
	target, cleanup, err := StartClientPod(ctx, Kube{Client: client, Execer: ex}, ClientPodSpec{Namespace: "ns", Names: rt.ChartNames(t, "r", nil),
		DB: DBSettings{Host: "db", Port: 5432, SecretName: "s", SecretKey: "k", ClientImage: "postgres:16"}})
	require.NoError(t, err)
	assert.Equal(t, SourceExternal, target.Kind())
	assert.Contains(t, target.String(), "pod ns/r-polyaxon-db-client-")
	jobs, err := client.BatchV1().Jobs("ns").List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, jobs.Items, 1)
	require.NoError(t, cleanup(ctx))
	jobs, err = client.BatchV1().Jobs("ns").List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	assert.Empty(t, jobs.Items)
}

func TestLoadReleaseAndTarget(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset(
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "polyaxon-postgresql-0", Namespace: "ns", Labels: labels("polyaxon", "postgresql")},
			Status: corev1.PodStatus{Phase: corev1.PodRunning}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "polyaxon-postgresql", Namespace: "ns"},
			Data: map[string][]byte{"postgres-password": []byte("from-secret")}},
	)
	store := driver.NewSecrets(client.CoreV1().Secrets("ns"))
	ch, err := render.LoadFS(charts.FS, charts.Root)
	require.NoError(t, err)
	ch.Metadata.Version, ch.Metadata.AppVersion = "2.15.1", "2.15.0"
	for v, st := range map[int]release.Status{1: release.StatusSuperseded, 2: release.StatusDeployed} {
		rel := &release.Release{Name: "polyaxon", Namespace: "ns", Version: v, Chart: ch,
			Config: map[string]any{"postgresql": map[string]any{"auth": map[string]any{"database": "db" + string(rune('0'+v))}}},
			Info:   &release.Info{Status: st}}
		require.NoError(t, store.Create("sh.helm.release.v1.polyaxon.v"+string(rune('0'+v)), rel))
	}
	rel, err := LoadRelease(ctx, client, "ns", "polyaxon")
	require.NoError(t, err)
	assert.Equal(t, ReleaseInfo{Name: "polyaxon", Namespace: "ns", Revision: 2, ChartVersion: "2.15.1", AppVersion: "2.15.0"}, rel.Info)
	assert.Equal(t, "db2", DatabaseSettings(rel.Names, rel.ChartValues).Database)
	assert.Equal(t, rt.ChartNames(t, "polyaxon", nil), rel.Names, "the names of the release's own chart")

	_, err = LoadRelease(ctx, client, "ns", "missing")
	require.ErrorContains(t, err, "no deployed revision")

	target, cleanup, err := ReleaseTarget(ctx, Kube{Client: client, Execer: &localExecer{}}, rel, TargetOptions{})
	require.NoError(t, err)
	require.NoError(t, cleanup(ctx))
	assert.Equal(t, "pod ns/polyaxon-postgresql-0 container postgresql", target.String())
	assert.Equal(t, SourceInCluster, target.Kind())

	local, _, err := ReleaseTarget(ctx, Kube{Client: client}, rel, TargetOptions{Local: true, LocalConn: Conn{Port: 15432}})
	require.NoError(t, err)
	lt := local.(*LocalTarget)
	assert.Equal(t, "local polyaxon@127.0.0.1:15432/db2", lt.String())
	assert.Equal(t, "from-secret", lt.conn.Password)
}

// A restore stops every writer the chart declares (files/components.yaml: its core
// components), and no dependency: adding a core component is a change to that file only.
func TestReleaseScalerFollowsTheChartsComponents(t *testing.T) {
	ctx := context.Background()
	decl := contract.EmbeddedComponents()
	var objs []runtime.Object
	for _, c := range append(append([]string(nil), decl.Core...), decl.Dependencies...) {
		objs = append(objs, deployment("polyaxon-"+c, "polyaxon", c, 1))
	}
	client := fake.NewClientset(objs...)
	back, err := (&ReleaseScaler{Client: client, Namespace: "ns", Names: rt.ChartNames(t, "polyaxon", nil), Poll: time.Millisecond}).ScaleDown(ctx)
	require.NoError(t, err)
	for _, c := range append(append([]string(nil), decl.Core...), decl.Dependencies...) {
		d, err := client.AppsV1().Deployments("ns").Get(ctx, "polyaxon-"+c, metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, decl.IsDependency(c), *d.Spec.Replicas == 1, "%s: only dependencies keep running", c)
	}
	require.NoError(t, back(ctx))
}

// A restore killed while the writers were down left them at 0 with their replicas recorded:
// ScaleBack (recover) brings back exactly those, once.
func TestScaleBackAfterAKilledRestore(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset(
		deployment("polyaxon-gateway", "polyaxon", "gateway", 2),
		deployment("polyaxon-worker", "polyaxon", "worker", 3),
		deployment("other-gateway", "other", "gateway", 1),
	)
	s := &ReleaseScaler{Client: client, Namespace: "ns", Names: rt.ChartNames(t, "polyaxon", nil), Poll: time.Millisecond}
	_, err := s.ScaleDown(ctx) // and the process dies: its scale-back never runs
	require.NoError(t, err)
	other, err := client.AppsV1().Deployments("ns").Get(ctx, "other-gateway", metav1.GetOptions{})
	require.NoError(t, err)
	other.Annotations = map[string]string{ReplicasAnnotation: "5"} // another release's record
	_, err = client.AppsV1().Deployments("ns").Update(ctx, other, metav1.UpdateOptions{})
	require.NoError(t, err)

	back, err := s.ScaleBack(ctx)
	require.NoError(t, err)
	assert.Equal(t, []string{"polyaxon-gateway: 2", "polyaxon-worker: 3"}, back)
	for name, want := range map[string]int32{"polyaxon-gateway": 2, "polyaxon-worker": 3, "other-gateway": 1} {
		d, err := client.AppsV1().Deployments("ns").Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, want, *d.Spec.Replicas, name)
		_, recorded := RecordedReplicas(d)
		assert.Equal(t, name == "other-gateway", recorded, name)
	}
	again, err := s.ScaleBack(ctx)
	require.NoError(t, err)
	assert.Empty(t, again, "nothing left to bring back")
}
