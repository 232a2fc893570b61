package charts_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
)

// With runs in their own namespace, the gateway and the runs mount two claims of one name; the
// store is one only when both are bound to volumes of one filesystem.
func TestArtifactsClaimsShareOneFilesystem(t *testing.T) {
	nfs := map[string]any{"nfs": map[string]any{"server": "files.internal", "path": "/exports/polyaxon"}}
	shared := map[string]any{"artifactsStore": map[string]any{"persistence": map[string]any{"sharedVolume": nfs, "mountOptions": []any{"nfsvers=4.1"}}}}
	r := render(t, profileValues(t, "production"), shared)

	claims := map[string]corev1.PersistentVolumeClaim{}
	for _, o := range r.byKind("PersistentVolumeClaim") {
		var c corev1.PersistentVolumeClaim
		decodeStrict(t, o, &c)
		claims[c.Namespace] = c
	}
	require.Len(t, claims, 2, "the gateway's claim and the runs'")
	volumes := map[string]corev1.PersistentVolume{}
	for _, o := range r.byKind("PersistentVolume") {
		var v corev1.PersistentVolume
		decodeStrict(t, o, &v)
		volumes[v.Name] = v
	}
	require.Len(t, volumes, 2, "a volume for each claim")
	for ns, c := range claims {
		assert.Equal(t, "polyaxon-artifacts", c.Name)
		require.NotNil(t, c.Spec.StorageClassName, ns)
		assert.Empty(t, *c.Spec.StorageClassName, "%s: no class, so nothing is provisioned and a WaitForFirstConsumer class never holds it", ns)
		v, ok := volumes[c.Spec.VolumeName]
		require.True(t, ok, "%s: its claim names the chart's volume %q", ns, c.Spec.VolumeName)
		assert.Equal(t, ns, v.Spec.ClaimRef.Namespace)
		assert.Equal(t, c.Name, v.Spec.ClaimRef.Name)
		assert.Equal(t, corev1.PersistentVolumeReclaimRetain, v.Spec.PersistentVolumeReclaimPolicy)
		assert.Equal(t, &corev1.NFSVolumeSource{Server: "files.internal", Path: "/exports/polyaxon"}, v.Spec.NFS, ns)
		assert.Equal(t, []string{"nfsvers=4.1"}, v.Spec.MountOptions)
		assert.Equal(t, c.Spec.AccessModes, v.Spec.AccessModes)
	}
	assert.NotContains(t, r.notes, "provisioned apart")

	// Without a shared filesystem the two claims are two volumes: the NOTES say what that costs.
	apart := render(t, profileValues(t, "production"))
	assert.Empty(t, apart.byKind("PersistentVolume"))
	assert.Contains(t, apart.notes, "the artifacts store's claims in polyaxon and polyaxon-runs are provisioned apart, as two volumes: the UI will not show what runs write")
	prebound := render(t, profileValues(t, "production"), map[string]any{"artifactsStore": map[string]any{"persistence": map[string]any{"volumeName": "a", "runsVolumeName": "b"}}})
	assert.NotContains(t, prebound.notes, "provisioned apart")

	// One way at a time.
	for name, bad := range map[string]map[string]any{
		"existingClaim are both set: the chart makes volumes on sharedVolume for the claims it creates": {"existingClaim": "mine"},
		"volumeName/runsVolumeName are both set":                                                        {"runsVolumeName": "pv-1"},
	} {
		_, err := renderWith(loadChart(t), mergeValues(profileValues(t, "production"), shared, map[string]any{"artifactsStore": map[string]any{"persistence": bad}}), false, nil)
		require.Error(t, err, name)
		assert.Contains(t, err.Error(), "values: artifactsStore.persistence.sharedVolume and "+name)
	}
}

// The ServiceAccounts carry the annotations the user gives (each its own); a bucket without a
// credentials Secret is still refused, saying why a workload identity does not reach runs.
func TestServiceAccountAnnotationsAndBucketCredentials(t *testing.T) {
	bucket := map[string]any{"artifactsStore": map[string]any{"kind": "s3", "bucket": "s3://plx-artifacts"}}
	gateway := map[string]any{"gateway": map[string]any{"serviceAccount": map[string]any{"annotations": map[string]any{"eks.amazonaws.com/role-arn": "arn:aws:iam::1:role/plx-gateway"}}}}
	runsWebhook := map[string]any{"runs": map[string]any{"serviceAccount": map[string]any{"annotations": map[string]any{"eks.amazonaws.com/role-arn": "arn:aws:iam::1:role/plx-runs"}}}}
	_, err := renderWith(loadChart(t), mergeValues(profileValues(t, "production"), bucket, gateway), false, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "artifactsStore.secret.name is empty")
	assert.Contains(t, err.Error(), "artifactsStore.workloadIdentity.enabled", "the other way, named")

	// EKS's webhook would mount the runs' role in every container of a run pod.
	withSecret := map[string]any{"artifactsStore": map[string]any{"secret": map[string]any{"name": "s3-credentials"}}}
	_, err = renderWith(loadChart(t), mergeValues(profileValues(t, "production"), bucket, withSecret, gateway, runsWebhook), false, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `runs.serviceAccount.annotations has "eks.amazonaws.com/role-arn"`)

	runsOwn := map[string]any{"runs": map[string]any{"serviceAccount": map[string]any{"annotations": map[string]any{"example.com/team": "ml"}}}}
	r := render(t, profileValues(t, "production"), bucket, withSecret, gateway, runsOwn)
	accounts := map[string]map[string]string{}
	for _, o := range r.byKind("ServiceAccount") {
		accounts[o.GetName()] = o.GetAnnotations()
	}
	assert.Equal(t, "arn:aws:iam::1:role/plx-gateway", accounts["polyaxon-gateway"]["eks.amazonaws.com/role-arn"])
	assert.Equal(t, "ml", accounts["polyaxon-runs"]["example.com/team"])
	assert.NotContains(t, accounts["polyaxon-agent"], "eks.amazonaws.com/role-arn", "the agent's ServiceAccount gets only its own annotations")
}
