package preflight_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/polyaxon-deploy/polyaxon-deploy/charts"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/check"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/preflight"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/profile"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/render"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/values"
)

func storageClass(name, provisioner string, isDefault bool) *storagev1.StorageClass {
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: provisioner}
	if isDefault {
		sc.Annotations = map[string]string{"storageclass.kubernetes.io/is-default-class": "true"}
	}
	return sc
}

func volume(name, class, size string, modes ...corev1.PersistentVolumeAccessMode) *corev1.PersistentVolume {
	return &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PersistentVolumeSpec{
		StorageClassName: class, AccessModes: modes, Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}},
		Status: corev1.PersistentVolumeStatus{Phase: corev1.VolumeAvailable}}
}

// storeCheck renders the embedded chart with a profile and values, and runs artifacts-store on
// a fake cluster holding objs.
func storeCheck(t *testing.T, profileName string, vals map[string]any, objs ...runtime.Object) check.Result {
	t.Helper()
	return oneCheck(t, "artifacts-store", profileName, vals, objs...)
}

// oneCheck runs the check id on the embedded chart rendered with a profile and values, on a
// fake cluster holding objs.
func oneCheck(t *testing.T, id, profileName string, vals map[string]any, objs ...runtime.Object) check.Result {
	t.Helper()
	ch, err := render.LoadFS(charts.FS, charts.Root)
	require.NoError(t, err)
	p, err := profile.Load(profileName)
	require.NoError(t, err)
	res, err := render.Render(ch, values.Merge(p.Values, vals), render.Options{ReleaseName: "polyaxon", Namespace: ns})
	require.NoError(t, err)
	e := &preflight.Env{Release: "polyaxon", Namespace: ns, Chart: ch, Rendered: res,
		Clients: &clients{cs: fake.NewClientset(objs...)}}
	for _, c := range preflight.Checks(e) {
		if c.ID == id {
			return check.NewRunner([]check.Check{c}).Run(context.Background()).Results[0]
		}
	}
	t.Fatalf("no %s check", id)
	return check.Result{}
}

func TestArtifactsStoreShared(t *testing.T) {
	static := storageClass("standard", "kubernetes.io/no-provisioner", true)
	rwx := volume("pv-rwx", "standard", "500Gi", corev1.ReadWriteOnce, corev1.ReadWriteMany)
	existingNFS := map[string]any{"artifactsStore": map[string]any{"persistence": map[string]any{"existingClaim": "nfs-artifacts"}}}
	nfsClaim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "nfs-artifacts", Namespace: ns},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("50Gi")}}}}
	boundTo := func(name, namespace, claim string) *corev1.PersistentVolume {
		pv := volume(name, "standard", "50Gi", corev1.ReadWriteMany)
		pv.Spec.ClaimRef = &corev1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: namespace, Name: claim}
		pv.Status.Phase = corev1.VolumeBound
		return pv
	}
	cases := []struct {
		name    string
		profile string
		vals    map[string]any
		objs    []runtime.Object
		status  check.Status
		detail  string
	}{
		{"production, a pre-created shared volume", "production", nil, []runtime.Object{static, rwx}, check.Passed, "pre-created ReadWriteMany volumes"},
		{"production, no shared volume to bind", "production", nil,
			[]runtime.Object{static, volume("pv-rwo", "standard", "500Gi", corev1.ReadWriteOnce)}, check.Failed, "no Available PersistentVolume"},
		{"production, a shared volume of exactly the claim's size", "production", nil,
			[]runtime.Object{static, volume("pv-100", "standard", "100Gi", corev1.ReadWriteMany)}, check.Passed, "1 pre-created ReadWriteMany volumes"},
		{"an existing claim already bound (an upgrade)", "production", existingNFS, []runtime.Object{static, nfsClaim, boundTo("pv-nfs", ns, "nfs-artifacts")},
			check.Passed, "claim nfs-artifacts is bound to pv-nfs"},
		{"a volume bound to another claim of the namespace", "production", existingNFS, []runtime.Object{static, nfsClaim, boundTo("pv-other", ns, "other")},
			check.Failed, "no Available PersistentVolume"},
		{"a volume bound to a claim of that name in another namespace", "production", existingNFS,
			[]runtime.Object{static, nfsClaim, boundTo("pv-team-b", "team-b", "nfs-artifacts")}, check.Failed, "no Available PersistentVolume"},
		{"a claim the release binds to a volume of its own", "production",
			map[string]any{"artifactsStore": map[string]any{"persistence": map[string]any{"volumeName": "pv-a", "runsVolumeName": "pv-b"}}},
			[]runtime.Object{static}, check.Passed, "claim polyaxon-artifacts (ReadWriteMany) is bound to volume pv-a, named by the release"},
		{"production, a shared volume too small", "production", nil,
			[]runtime.Object{static, volume("pv-small", "standard", "10Gi", corev1.ReadWriteMany)}, check.Failed, "room enough"},
		{"production with a single-node claim", "production", map[string]any{"artifactsStore": map[string]any{"persistence": map[string]any{"accessModes": []any{"ReadWriteOnce"}}}},
			[]runtime.Object{static, rwx}, check.Failed, "is ReadWriteOnce, but the gateway runs 2 replicas"},
		{"one gateway, runs on other pools", "production", map[string]any{
			"gateway":        map[string]any{"replicas": 1, "pdb": map[string]any{"minAvailable": nil}},
			"artifactsStore": map[string]any{"persistence": map[string]any{"accessModes": []any{"ReadWriteOnce"}}}},
			[]runtime.Object{static}, check.Failed, "experiments runs go to polyaxon=experiments"},
		{"development: one node for everything", "development", nil, []runtime.Object{static}, check.Passed, "used on one node only"},
		{"a block-volume class", "production", nil, []runtime.Object{storageClass("gp3", "ebs.csi.aws.com", true)}, check.Failed, "one node at a time"},
		{"a file-share class", "production", nil, []runtime.Object{storageClass("efs", "efs.csi.aws.com", true)}, check.Passed, "ReadWriteMany from StorageClass efs"},
		{"a class the check does not know", "production", nil, []runtime.Object{storageClass("fancy", "fancy.example.com/csi", true)}, check.Warned, "does not know"},
		{"a named class", "production", map[string]any{"artifactsStore": map[string]any{"persistence": map[string]any{"storageClass": "nfs-client"}}},
			[]runtime.Object{storageClass("gp3", "ebs.csi.aws.com", true), storageClass("nfs-client", "cluster.local/nfs-subdir-external-provisioner", false)}, check.Passed, "nfs-client"},
		{"a bucket", "production", map[string]any{"artifactsStore": map[string]any{"kind": "s3", "bucket": "s3://b", "secret": map[string]any{"name": "creds"}}},
			nil, check.Skipped, "s3"},
		{"an existing claim that is not there", "production", map[string]any{"artifactsStore": map[string]any{"persistence": map[string]any{"existingClaim": "nfs-artifacts"}}},
			[]runtime.Object{static}, check.Failed, "claim nfs-artifacts not found"},
		{"an existing single-node claim", "production", map[string]any{"artifactsStore": map[string]any{"persistence": map[string]any{"existingClaim": "nfs-artifacts"}}},
			[]runtime.Object{static, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "nfs-artifacts", Namespace: ns},
				Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}}}}, check.Failed, "nfs-artifacts is ReadWriteOnce"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := storeCheck(t, tc.profile, tc.vals, tc.objs...)
			assert.Equal(t, tc.status, r.Status, r.Detail)
			assert.Contains(t, r.Detail, tc.detail)
			if tc.status == check.Failed {
				assert.Contains(t, r.Detail+r.Hint, "ReadWriteMany", "a failure says what would work")
			}
		})
	}
}

func TestArtifactsSharedBetweenNamespaces(t *testing.T) {
	persistence := func(p map[string]any) map[string]any {
		return map[string]any{"artifactsStore": map[string]any{"persistence": p}}
	}
	nfsVolume := func(name, path string) *corev1.PersistentVolume {
		pv := volume(name, "", "100Gi", corev1.ReadWriteMany)
		pv.Spec.NFS = &corev1.NFSVolumeSource{Server: "files.internal", Path: path}
		return pv
	}
	boundClaim := func(namespace, volume string) *corev1.PersistentVolumeClaim {
		return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "team-store", Namespace: namespace}, Spec: corev1.PersistentVolumeClaimSpec{VolumeName: volume}}
	}
	cases := []struct {
		name   string
		vals   map[string]any
		objs   []runtime.Object
		status check.Status
		detail string
	}{
		{"the chart's volumes on one shared filesystem", persistence(map[string]any{"sharedVolume": map[string]any{"nfs": map[string]any{"server": "files.internal", "path": "/polyaxon"}}}),
			nil, check.Passed, "claim polyaxon-artifacts in polyaxon and in polyaxon-runs: volumes polyaxon-polyaxon-artifacts and polyaxon-runs-polyaxon-artifacts on one source"},
		{"two provisioned volumes", nil, nil, check.Warned,
			"claim polyaxon-artifacts in namespace polyaxon names no volume, so a provisioner makes it one of its own: what runs write in polyaxon-runs would not reach the gateway"},
		{"pre-bound to volumes of one export", persistence(map[string]any{"volumeName": "pv-a", "runsVolumeName": "pv-b"}),
			[]runtime.Object{nfsVolume("pv-a", "/polyaxon"), nfsVolume("pv-b", "/polyaxon")}, check.Passed, "volumes pv-a and pv-b on one source"},
		{"pre-bound to volumes of two exports", persistence(map[string]any{"volumeName": "pv-a", "runsVolumeName": "pv-b"}),
			[]runtime.Object{nfsVolume("pv-a", "/polyaxon"), nfsVolume("pv-b", "/elsewhere")}, check.Failed, "bound to volume pv-a in namespace polyaxon and to volume pv-b in polyaxon-runs, on different storage"},
		{"pre-bound to a volume not made yet", persistence(map[string]any{"volumeName": "pv-a", "runsVolumeName": "pv-b"}),
			[]runtime.Object{nfsVolume("pv-a", "/polyaxon")}, check.Warned, "names volume pv-b, which does not exist"},
		{"existing claims on one export", persistence(map[string]any{"existingClaim": "team-store"}),
			[]runtime.Object{boundClaim(ns, "pv-a"), boundClaim("polyaxon-runs", "pv-b"), nfsVolume("pv-a", "/polyaxon"), nfsVolume("pv-b", "/polyaxon")}, check.Passed, "on one source"},
		{"an existing claim missing in the runs' namespace", persistence(map[string]any{"existingClaim": "team-store"}),
			[]runtime.Object{boundClaim(ns, "pv-a"), nfsVolume("pv-a", "/polyaxon")}, check.Failed, "claim team-store not found in namespace polyaxon-runs"},
		{"a bucket", map[string]any{"artifactsStore": map[string]any{"kind": "s3", "bucket": "s3://b", "secret": map[string]any{"name": "creds"}}}, nil, check.Skipped, "s3"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := oneCheck(t, "artifacts-sharing", "production", tc.vals, tc.objs...)
			assert.Equal(t, tc.status, r.Status, r.Detail)
			assert.Contains(t, r.Detail, tc.detail)
		})
	}
}
