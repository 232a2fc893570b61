package charts_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
)

// dataStoreIds are the chart's ids of each data store, none of them the platform's (2222),
// which every run pod gets by default.
var dataStoreIds = map[string]int64{"postgresql": 2232, "rabbitmq": 2233, "redis": 2234}

// clusterOf answers lookups from objs; StorageClasses can be listed (the default class).
func clusterOf(objs ...runtime.Object) fakeCluster {
	lists := map[schema.GroupVersionResource]string{
		{Group: "storage.k8s.io", Version: "v1", Resource: "storageclasses"}:   "StorageClassList",
		{Group: "", Version: "v1", Resource: "secrets"}:                        "SecretList",
		{Group: "", Version: "v1", Resource: "namespaces"}:                     "NamespaceList",
		{Group: "", Version: "v1", Resource: "services"}:                       "ServiceList",
		{Group: "discovery.k8s.io", Version: "v1", Resource: "endpointslices"}: "EndpointSliceList",
	}
	return fakeCluster{dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), lists, objs...)}
}

func object(apiVersion, kind, namespace, name string, fields map[string]any) *unstructured.Unstructured {
	o := map[string]any{"apiVersion": apiVersion, "kind": kind, "metadata": map[string]any{"name": name}}
	if namespace != "" {
		o["metadata"].(map[string]any)["namespace"] = namespace
	}
	for k, v := range fields {
		o[k] = v
	}
	return &unstructured.Unstructured{Object: o}
}

// liveStatefulSet is a data store's StatefulSet as an earlier release left it: its pods ran
// as uid, and its claim template is claim with modes.
func liveStatefulSet(name, claim string, uid int64, modes ...any) *unstructured.Unstructured {
	return object("apps/v1", "StatefulSet", testNamespace, name, map[string]any{"spec": map[string]any{
		"template": map[string]any{"spec": map[string]any{"securityContext": map[string]any{
			"runAsUser": uid, "runAsGroup": uid, "fsGroup": uid}}},
		"volumeClaimTemplates": []any{map[string]any{
			"metadata": map[string]any{"name": claim},
			"spec":     map[string]any{"accessModes": modes}}},
	}})
}

func storageClass(name, provisioner string, isDefault bool) *unstructured.Unstructured {
	o := object("storage.k8s.io/v1", "StorageClass", "", name, map[string]any{"provisioner": provisioner})
	if isDefault {
		o.SetAnnotations(map[string]string{"storageclass.kubernetes.io/is-default-class": "true"})
	}
	return o
}

func csiDriver(name string) *unstructured.Unstructured {
	return object("storage.k8s.io/v1", "CSIDriver", "", name, nil)
}

// dataStorePods are the data stores' pods and claims of a render, by component.
func dataStorePods(t *testing.T, r rendered) (ids map[string]int64, modes map[string][]corev1.PersistentVolumeAccessMode) {
	t.Helper()
	ids, modes = map[string]int64{}, map[string][]corev1.PersistentVolumeAccessMode{}
	for _, p := range r.pods(t) {
		if _, ok := dataStoreIds[p.component]; ok {
			require.NotNil(t, p.spec.SecurityContext, p.name)
			assert.Equal(t, *p.spec.SecurityContext.RunAsUser, *p.spec.SecurityContext.RunAsGroup, p.name)
			assert.Equal(t, *p.spec.SecurityContext.RunAsUser, *p.spec.SecurityContext.FSGroup, p.name)
			ids[p.component] = *p.spec.SecurityContext.RunAsUser
		}
	}
	for _, o := range r.byKind("StatefulSet") {
		templates, _, _ := unstructured.NestedSlice(o.Object, "spec", "volumeClaimTemplates")
		for _, tpl := range templates {
			raw, _, _ := unstructured.NestedStringSlice(tpl.(map[string]any), "spec", "accessModes")
			var m []corev1.PersistentVolumeAccessMode
			for _, s := range raw {
				m = append(m, corev1.PersistentVolumeAccessMode(s))
			}
			modes[o.GetLabels()["app.kubernetes.io/component"]] = m
		}
	}
	return ids, modes
}

func TestDataStoresRunWithIdsNoRunGets(t *testing.T) {
	vals := mergeValues(everything)
	r := render(t, vals)
	ids, _ := dataStorePods(t, r)
	assert.Equal(t, dataStoreIds, ids, "each data store has ids of its own")
	for _, p := range r.pods(t) {
		if _, ok := dataStoreIds[p.component]; !ok {
			assert.EqualValues(t, 2222, *p.spec.SecurityContext.RunAsUser, "%s: the platform's pods keep the platform's ids", p.name)
		}
	}

	// A run pod that asks for a data store's ids is refused, naming them.
	ev := admitter(t, render(t, profileValues(t, "production")))
	uid, gid := int64(2232), int64(2234)
	err := requireRefused(t, ev, podChange{"Postgres's uid", func(p *corev1.Pod) {
		p.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsUser: &uid, SupplementalGroups: []int64{gid}}
	}, "spec.securityContext: a run pod may not run with the ids of the platform's data stores (pod id 2232 (postgresql); pod id 2234 (redis))"})
	assert.Contains(t, err.Error(), "remove runAsUser, runAsGroup, fsGroup and supplementalGroups from the run's environment")
	requireRefused(t, ev, podChange{"Redis's group in a container", func(p *corev1.Pod) {
		p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{RunAsGroup: &gid}
	}, "container polyaxon-main id 2234 (redis)"})

	// Ids the values give a data store are refused when they are the platform's.
	_, err = renderWith(loadChart(t), mergeValues(vals, map[string]any{"redis": map[string]any{"securityContext": map[string]any{"group": 2222}}}), false, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "values: redis.securityContext.group is 2222, an id of the platform's pods and, by default, of every run pod")
}

// A data store that already runs keeps the ids its data was written with, as long as its claim
// is the same (a Postgres major upgrade starts on a new claim, and takes the new ids).
func TestDataStoresKeepTheIdsOfTheirData(t *testing.T) {
	vals := mergeValues(everything)
	ch := loadChart(t)
	legacy := clusterOf(
		liveStatefulSet("polyaxon-postgresql", "data-pg16", 2222, "ReadWriteOnce"),
		liveStatefulSet("polyaxon-redis", "data", 2222, "ReadWriteOnce"),
		liveStatefulSet("polyaxon-rabbitmq", "other-claim", 2222, "ReadWriteOnce"))
	r, err := renderWith(ch, vals, true, legacy)
	require.NoError(t, err)
	ids, _ := dataStorePods(t, r)
	assert.Equal(t, map[string]int64{"postgresql": 2222, "redis": 2222, "rabbitmq": 2233}, ids)
	assert.Contains(t, r.notes, "postgresql keeps ids 2222")
	assert.Contains(t, r.notes, "redis keeps ids 2222")
	assert.NotContains(t, r.notes, "rabbitmq keeps")

	// Kept ids that are the runs' are not in the runs' refusals (every run has them).
	assert.Equal(t, `{2233: "rabbitmq"}`, policyVariable(restrictions(t, r), "dataStoreIds"))

	// A new Postgres major opens a new claim: it takes the chart's ids.
	r, err = renderWith(ch, mergeValues(vals, map[string]any{"postgresql": map[string]any{"image": map[string]any{"tag": "17.2"}}}), true, legacy)
	require.NoError(t, err)
	ids, _ = dataStorePods(t, r)
	assert.EqualValues(t, 2232, ids["postgresql"])
}

func TestDataStoreClaimsAreOnePodsWhereTheClusterCan(t *testing.T) {
	vals := mergeValues(everything)
	ch := loadChart(t)
	modesWith := func(cluster fakeCluster, layers ...map[string]any) map[string][]corev1.PersistentVolumeAccessMode {
		t.Helper()
		r, err := renderWith(ch, mergeValues(append([]map[string]any{vals}, layers...)...), false, cluster)
		require.NoError(t, err)
		_, modes := dataStorePods(t, r)
		require.Len(t, modes, 3)
		return modes
	}
	rwo := []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
	rwop := []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOncePod}

	r := render(t, vals)
	_, offline := dataStorePods(t, r)
	assert.Equal(t, rwo, offline["postgresql"], "offline: nothing is known of the storage")

	csi := clusterOf(storageClass("standard", "ebs.csi.aws.com", true), csiDriver("ebs.csi.aws.com"), storageClass("local", "rancher.io/local-path", false))
	for c, m := range modesWith(csi) {
		assert.Equal(t, rwop, m, "%s on the default class, a CSI driver", c)
	}
	assert.Equal(t, rwo, modesWith(csi, map[string]any{"redis": map[string]any{"persistence": map[string]any{"storageClass": "local"}}})["redis"],
		"a class with an in-tree or external provisioner gets ReadWriteOnce")
	assert.Equal(t, rwop, modesWith(csi, map[string]any{"redis": map[string]any{"persistence": map[string]any{"storageClass": "standard"}}})["redis"])
	assert.Equal(t, rwo, modesWith(clusterOf(storageClass("standard", "ebs.csi.aws.com", true)))["postgresql"],
		"a provisioner the cluster does not list as a CSI driver gets ReadWriteOnce")
	assert.Equal(t, []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
		modesWith(csi, map[string]any{"postgresql": map[string]any{"persistence": map[string]any{"accessModes": []any{"ReadWriteMany"}}}})["postgresql"],
		"the values' modes win")

	// An existing claim template cannot change: a StatefulSet keeps its modes.
	withLive := clusterOf(storageClass("standard", "ebs.csi.aws.com", true), csiDriver("ebs.csi.aws.com"),
		liveStatefulSet("polyaxon-postgresql", "data-pg16", 2232, "ReadWriteOnce"))
	modes := modesWith(withLive)
	assert.Equal(t, rwo, modes["postgresql"])
	assert.Equal(t, rwop, modes["redis"])
}

// An upgrade of Polyaxon (or of the chart) leaves the data stores' pods alone: their pod
// templates carry no version, so the database keeps serving while the gateway rolls (a
// version label on them restarted PostgreSQL in the middle of an upgrade).
func TestPolyaxonUpgradeLeavesTheDataStoresRunning(t *testing.T) {
	templates := func(version string) map[string]any {
		r := render(t, profileValues(t, "production"), map[string]any{"polyaxon": map[string]any{"version": version}, "redis": map[string]any{"enabled": true}})
		out := map[string]any{}
		for _, o := range r.byKind("StatefulSet") {
			tpl, _, err := unstructured.NestedMap(o.Object, "spec", "template")
			require.NoError(t, err)
			out[o.GetLabels()["app.kubernetes.io/component"]] = tpl
		}
		return out
	}
	before, after := templates("2.15.1"), templates("2.18.0")
	require.Contains(t, before, "postgresql")
	require.Contains(t, before, "redis")
	assert.Equal(t, before, after, "the data stores' pod templates are the same for 2.15.1 and 2.18.0")

	for _, o := range render(t, mergeValues(everything)).byKind("StatefulSet") {
		labels, _, err := unstructured.NestedStringMap(o.Object, "spec", "template", "metadata", "labels")
		require.NoError(t, err)
		for _, versioned := range []string{"app.kubernetes.io/version", "helm.sh/chart"} {
			assert.NotContains(t, labels, versioned, "%s's pod template", o.GetName())
		}
	}
}
