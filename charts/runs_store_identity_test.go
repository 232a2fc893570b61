package charts_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/admission"
)

const (
	identityRole  = "arn:aws:iam::111122223333:role/polyaxon-artifacts"
	identityMount = "/var/run/secrets/polyaxon-deploy/store-identity"
)

func identityStoreValues(extra map[string]any) map[string]any {
	w := map[string]any{"enabled": true, "roleArn": identityRole, "region": "eu-west-1"}
	for k, v := range extra {
		w[k] = v
	}
	return map[string]any{"artifactsStore": map[string]any{"kind": "s3", "bucket": "s3://polyaxon-artifacts", "workloadIdentity": w}}
}

// identityPod is a storepods fixture as Polyaxon's converter builds it for a store connection
// with no Secret: its init containers and sidecar get nothing from the connection
// (polyaxon/_k8s/converter/base/init.py and sidecar.py give a bucket only its secret or
// configMap), so the keyed pod without the Secret's envFrom.
func identityPod(t *testing.T, name string) *corev1.Pod {
	t.Helper()
	pod := storePod(t, name)
	for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			var kept []corev1.EnvFromSource
			for _, e := range cs[i].EnvFrom {
				if e.SecretRef == nil || e.SecretRef.Name != "polyaxon-s3" {
					kept = append(kept, e)
				}
			}
			cs[i].EnvFrom = kept
		}
	}
	return pod
}

func holdsIdentity(c corev1.Container) bool {
	for _, m := range c.VolumeMounts {
		if m.Name == "polyaxon-store-identity" {
			return true
		}
	}
	return false
}

func envOf(c corev1.Container) map[string]string {
	out := map[string]string{}
	for _, e := range c.Env {
		out[e.Name] = e.Value
	}
	return out
}

// Issue 56: a bucket reached with a workload identity instead of keys. The token is the runs'
// ServiceAccount's, for the cloud's audience: whoever holds it reads the whole bucket, every
// project's runs. The API server gives it to Polyaxon's own init container that fetches this
// run's artifacts and to its guarded sidecar, never to the run's own code, and refuses a pod
// where any other container mounts it.
func TestStoreIdentityReachesOnlyPolyaxonsOwnContainers(t *testing.T) {
	ev := admitter(t, render(t, profileValues(t, "production"), identityStoreValues(nil)))
	ctx := context.Background()

	admitted, err := ev.AdmitPod(ctx, identityPod(t, "plain"))
	require.NoError(t, err)
	var volume *corev1.Volume
	for i, v := range admitted.Spec.Volumes {
		if v.Name == "polyaxon-store-identity" {
			volume = &admitted.Spec.Volumes[i]
		}
	}
	require.NotNil(t, volume, "the pod gets the token's volume")
	require.NotNil(t, volume.Projected)
	require.Len(t, volume.Projected.Sources, 1)
	token := volume.Projected.Sources[0].ServiceAccountToken
	require.NotNil(t, token)
	assert.Equal(t, "sts.amazonaws.com", token.Audience)
	assert.EqualValues(t, 3600, *token.ExpirationSeconds)

	init, main, sidecar := admitted.Spec.InitContainers[0], admitted.Spec.Containers[0], nativeSidecar(t, admitted)
	require.Equal(t, "polyaxon-main", main.Name)
	for _, c := range []corev1.Container{init, sidecar} {
		assert.True(t, holdsIdentity(c), "%s: Polyaxon's own container gets the token", c.Name)
		env := envOf(c)
		assert.Equal(t, identityRole, env["AWS_ROLE_ARN"], c.Name)
		assert.Equal(t, identityMount+"/token", env["AWS_WEB_IDENTITY_TOKEN_FILE"], c.Name)
		assert.Equal(t, "eu-west-1", env["AWS_REGION"], c.Name)
		assert.NotContains(t, env, "AWS_ASSUME_ROLE", "Polyaxon would trade the role itself, without the token")
	}
	assert.Equal(t, []string{"python", "-c"}, sidecar.Command[:2], "the sidecar holding the token is the guarded one")
	assert.False(t, holdsIdentity(main), "the run's own container gets no token")
	assert.NotContains(t, envOf(main), "AWS_ROLE_ARN")

	// The run's own additions get nothing, and are admitted as before.
	for _, name := range []string{"init-own", "user-sidecar", "init-git", "connections"} {
		pod, err := ev.AdmitPod(ctx, identityPod(t, name))
		require.NoError(t, err, name)
		for _, c := range append(append([]corev1.Container{}, pod.Spec.InitContainers...), pod.Spec.Containers...) {
			own := c.Name == "polyaxon-sidecar" || (strings.HasPrefix(c.Name, "polyaxon-init-artifacts-") && c.Image == "polyaxon/polyaxon-init:2.18.0")
			if !own {
				assert.False(t, holdsIdentity(c), "%s: container %s (%s) is not Polyaxon's fetching this run's artifacts", name, c.Name, c.Image)
			}
		}
	}
	// Polyaxon's containers in a shape of the polyaxonfile's (another run's artifacts, a
	// command, image or variable of its own): no token, so the run's code cannot use them.
	for _, name := range []string{"init-dirs", "init-dotdot", "init-paths", "init-injection", "init-env", "init-container-override", "tensorboard"} {
		pod, err := ev.AdmitPod(ctx, identityPod(t, name))
		if err != nil {
			continue // refused for another reason is as good
		}
		for _, c := range pod.Spec.InitContainers {
			// Polyaxon's own, fetching the run's outputs, is in every fixture and keeps it, as
			// does its sidecar, a native one.
			own := c.Name == "polyaxon-init-artifacts-default" || c.Name == "polyaxon-sidecar"
			assert.Equal(t, own, holdsIdentity(c), "%s: init container %s", name, c.Name)
		}
	}
	sidecarChanges := map[string]func(*corev1.Pod){
		"a variable of its own": func(p *corev1.Pod) {
			p.Spec.Containers[1].Env = append(p.Spec.Containers[1].Env, corev1.EnvVar{Name: "LD_PRELOAD", Value: "/plx-context/artifacts/x.so"})
		},
		"a role of its own": func(p *corev1.Pod) {
			p.Spec.Containers[1].Env = append(p.Spec.Containers[1].Env, corev1.EnvVar{Name: "AWS_ROLE_ARN", Value: "arn:aws:iam::444455556666:role/other"})
		},
		"a hook": func(p *corev1.Pod) {
			p.Spec.Containers[1].Lifecycle = &corev1.Lifecycle{PostStart: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"sh", "-c", "cat /var/run/secrets/polyaxon-deploy/store-identity/token"}}}}
		},
		"another run's": func(p *corev1.Pod) {
			setEnv(p, 1, "POLYAXON_RUN_INSTANCE", "default.vision.runs.fedcba9876543210fedcba9876543210")
		},
		"another image under its name": func(p *corev1.Pod) { p.Spec.Containers[1].Image = "python:3.11" },
		"a mount over the sidecar's code": func(p *corev1.Pod) {
			p.Spec.Containers[1].VolumeMounts = append(p.Spec.Containers[1].VolumeMounts, corev1.VolumeMount{Name: "artifacts-context", MountPath: "/usr/local/lib/python3.11"})
		},
	}
	for name, change := range sidecarChanges {
		pod := identityPod(t, "plain")
		change(pod)
		out, err := ev.AdmitPod(ctx, pod)
		if err != nil {
			continue
		}
		for _, c := range append(slices.Clone(out.Spec.InitContainers), out.Spec.Containers...) {
			assert.False(t, holdsIdentity(c) && !strings.HasPrefix(c.Name, "polyaxon-init-artifacts-"), "sidecar with %s: %s gets no token", name, c.Name)
		}
	}

	// Every way a polyaxonfile has to put the token in code of its own is refused, by name.
	mountIn := func(p *corev1.Pod, i int, volume string) {
		p.Spec.Containers[i].VolumeMounts = append(p.Spec.Containers[i].VolumeMounts, corev1.VolumeMount{Name: volume, MountPath: "/tok"})
	}
	exp := int64(3600)
	ownToken := func(audience string, seconds int64) corev1.Volume {
		return corev1.Volume{Name: "mine", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Audience: audience, ExpirationSeconds: &seconds, Path: "t"}}}}}}
	}
	refused := map[string]struct {
		change func(*corev1.Pod)
		want   string
	}{
		// The volume the policy adds, named in advance by the run's container.
		"the chart's volume, by name": {func(p *corev1.Pod) { mountIn(p, 0, "polyaxon-store-identity") }, "container polyaxon-main (python:3.11) is the run's own"},
		"a token of its own for the cloud": {func(p *corev1.Pod) {
			p.Spec.Volumes = append(p.Spec.Volumes, ownToken("sts.amazonaws.com", exp))
			mountIn(p, 0, "mine")
		}, "container polyaxon-main (python:3.11) is the run's own"},
		"a user sidecar with the token": {func(p *corev1.Pod) {
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "helper", Image: "busybox"})
			mountIn(p, 2, "polyaxon-store-identity")
		}, "container helper (busybox) is the run's own"},
		"an init container of its own with the token": {func(p *corev1.Pod) {
			p.Spec.InitContainers = append(p.Spec.InitContainers, corev1.Container{Name: "grab", Image: "busybox",
				VolumeMounts: []corev1.VolumeMount{{Name: "polyaxon-store-identity", MountPath: "/tok"}}})
		}, "init container grab (busybox) is not Polyaxon's init container"},
	}
	for name, c := range refused {
		pod := identityPod(t, "plain")
		c.change(pod)
		_, err := ev.AdmitPod(ctx, pod)
		require.Error(t, err, name)
		assert.True(t, admission.IsRefusal(err), "%s: %v", name, err)
		assert.Contains(t, err.Error(), "the artifacts store's workload identity (a token for audience sts.amazonaws.com) reach only Polyaxon's own init container", name)
		assert.Contains(t, err.Error(), c.want, name)
	}
	// The cloud's audience for longer than the chart's lifetime, even unmounted.
	pod := identityPod(t, "plain")
	pod.Spec.Volumes = append(pod.Spec.Volumes, ownToken("sts.amazonaws.com", 86400))
	_, err = ev.AdmitPod(ctx, pod)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "volume mine projects a token for audience sts.amazonaws.com, 86400 s")
	// Another audience is refused as without the identity.
	pod = identityPod(t, "plain")
	pod.Spec.Volumes = append(pod.Spec.Volumes, ownToken("vault", exp))
	_, err = ev.AdmitPod(ctx, pod)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "volume mine projects a token for audience vault")
}

func setEnv(p *corev1.Pod, i int, name, value string) {
	for j, e := range p.Spec.Containers[i].Env {
		if e.Name == name {
			p.Spec.Containers[i].Env[j].Value = value
		}
	}
}

// The gateway reads the bucket with its own account's token: in haupt's API and streams
// containers, not in nginx; no Secret is asked for.
func TestStoreIdentityInTheGateway(t *testing.T) {
	r := render(t, profileValues(t, "production"), identityStoreValues(nil))
	var d appsv1.Deployment
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(r.get("Deployment", "polyaxon-gateway").Object, &d))
	holders := map[string]bool{}
	for _, c := range d.Spec.Template.Spec.Containers {
		holders[c.Name] = holdsIdentity(c)
		if holdsIdentity(c) {
			assert.Equal(t, identityRole, envOf(c)["AWS_ROLE_ARN"], c.Name)
			assert.Equal(t, identityMount+"/token", envOf(c)["AWS_WEB_IDENTITY_TOKEN_FILE"], c.Name)
		}
		for _, e := range c.EnvFrom {
			assert.Nil(t, e.SecretRef, "%s loads no store Secret", c.Name)
		}
	}
	assert.Equal(t, map[string]bool{"gateway": true, "streams": true, "proxy": false}, holders)
	found := false
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.Name == "polyaxon-store-identity" {
			found = true
			assert.Equal(t, "sts.amazonaws.com", v.Projected.Sources[0].ServiceAccountToken.Audience)
		}
	}
	assert.True(t, found)
}

// gcs: google-auth reads an external account's configuration from the gcloud folder, beside
// the token; Polyaxon would read GOOGLE_APPLICATION_CREDENTIALS as a service account's key.
func TestStoreIdentityOnGCS(t *testing.T) {
	provider := "//iam.googleapis.com/projects/123456789012/locations/global/workloadIdentityPools/polyaxon/providers/cluster"
	vals := map[string]any{"artifactsStore": map[string]any{"kind": "gcs", "bucket": "gs://polyaxon-artifacts", "workloadIdentity": map[string]any{
		"enabled": true, "provider": provider, "audience": "https://iam.googleapis.com" + strings.TrimPrefix(provider, "//iam.googleapis.com"),
		"serviceAccount": "artifacts@my-project.iam.gserviceaccount.com"}}}
	r := render(t, profileValues(t, "production"), vals)
	namespaces := []string{}
	for _, cm := range r.byKind("ConfigMap") {
		if cm.GetName() != "polyaxon-store-identity" {
			continue
		}
		namespaces = append(namespaces, cm.GetNamespace())
		data, _, err := unstructured.NestedString(cm.Object, "data", "application_default_credentials.json")
		require.NoError(t, err)
		var conf map[string]any
		require.NoError(t, json.Unmarshal([]byte(data), &conf))
		assert.Equal(t, "external_account", conf["type"])
		assert.Equal(t, provider, conf["audience"])
		assert.Equal(t, identityMount+"/token", conf["credential_source"].(map[string]any)["file"])
		assert.Equal(t, "https://iamcredentials.googleapis.com/v1/projects/-/serviceAccounts/artifacts@my-project.iam.gserviceaccount.com:generateAccessToken", conf["service_account_impersonation_url"])
	}
	assert.ElementsMatch(t, []string{"polyaxon", "polyaxon-runs"}, namespaces)

	ev := admitter(t, r)
	pod := identityPod(t, "plain")
	for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			for j, e := range cs[i].Env {
				if e.Name == "POLYAXON_CONNECTIONS_CATALOG" {
					cs[i].Env[j].Value = strings.ReplaceAll(strings.ReplaceAll(e.Value, "s3://", "gs://"), `"s3"`, `"gcs"`)
				}
			}
			for j, a := range cs[i].Args {
				cs[i].Args[j] = strings.ReplaceAll(strings.ReplaceAll(a, "s3://", "gs://"), "connection-kind=s3", "connection-kind=gcs")
			}
		}
	}
	out, err := ev.AdmitPod(context.Background(), pod)
	require.NoError(t, err)
	sidecar := nativeSidecar(t, out)
	assert.True(t, holdsIdentity(sidecar))
	assert.Equal(t, identityMount, envOf(sidecar)["CLOUDSDK_CONFIG"])
	assert.True(t, holdsIdentity(out.Spec.InitContainers[0]), "the init container fetching the run's artifacts from gs://")
	assert.False(t, holdsIdentity(out.Spec.Containers[0]))
}

// What the chart refuses at render, each naming the value and the fix.
func TestStoreIdentityRefusals(t *testing.T) {
	cases := map[string]struct {
		vals map[string]any
		want string
	}{
		"keys beside it": {mergeValues(identityStoreValues(nil), map[string]any{"artifactsStore": map[string]any{"secret": map[string]any{"name": "polyaxon-s3"}}}),
			"artifactsStore.workloadIdentity.enabled and artifactsStore.secret.name (\"polyaxon-s3\") are both set"},
		"no role":          {identityStoreValues(map[string]any{"roleArn": ""}), "artifactsStore.workloadIdentity.roleArn is empty"},
		"wasb":             {map[string]any{"artifactsStore": map[string]any{"kind": "wasb", "bucket": "wasbs://a@b.blob.core.windows.net/", "workloadIdentity": map[string]any{"enabled": true}}}, "Polyaxon 2.18 cannot reach Azure Blob Storage with a workload identity"},
		"gcs, no provider": {map[string]any{"artifactsStore": map[string]any{"kind": "gcs", "bucket": "gs://b", "workloadIdentity": map[string]any{"enabled": true, "audience": "x"}}}, "artifactsStore.workloadIdentity.provider is empty"},
		"a day's token":    {identityStoreValues(map[string]any{"expirationSeconds": 86400}), "artifactsStore.workloadIdentity.expirationSeconds is 86400"},
		"the cloud's webhook on the runs' account": {mergeValues(identityStoreValues(nil), map[string]any{"runs": map[string]any{"serviceAccount": map[string]any{"annotations": map[string]any{"eks.amazonaws.com/role-arn": identityRole}}}}),
			`runs.serviceAccount.annotations has "eks.amazonaws.com/role-arn"`},
		"neither keys nor identity": {map[string]any{"artifactsStore": map[string]any{"kind": "s3", "bucket": "s3://b"}}, "artifactsStore.workloadIdentity.enabled"},
	}
	for name, c := range cases {
		_, err := renderWith(loadChart(t), mergeValues(profileValues(t, "production"), c.vals), false, nil)
		require.Error(t, err, name)
		assert.Contains(t, err.Error(), c.want, name)
	}

	// An API server without MutatingAdmissionPolicy could not keep the token from the run's code.
	opts := chartutil.ReleaseOptions{Name: testRelease, Namespace: testNamespace, Revision: 1, IsInstall: true}
	ch := loadChart(t)
	top, err := chartutil.ToRenderValues(ch, mergeValues(profileValues(t, "production"), identityStoreValues(nil)), opts, chartutil.DefaultCapabilities.Copy())
	require.NoError(t, err)
	_, err = engine.Render(ch, top)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "artifactsStore.workloadIdentity.enabled needs the API server's MutatingAdmissionPolicy")
}

// What a review found (issue 56): a polyaxonfile that drops Polyaxon's sidecar
// (plugins.sidecar.noConnections with no collection) keeps a sidecar of its own verbatim, which
// may be named and built like Polyaxon's. With its context a volume of the run's that holds a
// token for the cloud (or the keys' Secret), laid out as a file of the run's outputs, the
// guarded sidecar would upload it for the run's user to download. And one process namespace
// would let the run's container read the sidecar's files and environment.
func TestStoreCredentialsCannotBeTheSidecarsContext(t *testing.T) {
	ctx := context.Background()
	exp := int64(3600)
	impostor := func(base *corev1.Pod, volume corev1.Volume, subPath string) *corev1.Pod {
		pod := base.DeepCopy()
		pod.Spec.Volumes = append(pod.Spec.Volumes, volume)
		sc := pod.Spec.Containers[1]
		sc.VolumeMounts = []corev1.VolumeMount{{Name: volume.Name, MountPath: "/plx-context/artifacts", SubPath: subPath}}
		pod.Spec.Containers[1] = sc
		return pod
	}
	token := corev1.Volume{Name: "tok", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
		{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Audience: "sts.amazonaws.com", ExpirationSeconds: &exp, Path: storePodsRun + "/outputs/token"}}}}}}
	keys := corev1.Volume{Name: "keys", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
		{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "polyaxon-s3"},
			Items: []corev1.KeyToPath{{Key: "AWS_SECRET_ACCESS_KEY", Path: storePodsRun + "/outputs/key"}}}}}}}}

	identity := admitter(t, render(t, profileValues(t, "production"), identityStoreValues(nil)))
	for _, sub := range []string{"", "..data"} {
		_, err := identity.AdmitPod(ctx, impostor(identityPod(t, "plain"), token, sub))
		require.Error(t, err, "a token of the run's for the cloud as the sidecar's context (subPath %q)", sub)
		assert.Contains(t, err.Error(), "container polyaxon-sidecar (polyaxon/polyaxon-sidecar:2.18.0) runs with a command, variable or mount of the polyaxonfile's")
	}
	// Such a volume is refused by itself, mounted or not: the cloud's audience is the chart's
	// volume's alone.
	pod := identityPod(t, "plain")
	pod.Spec.Volumes = append(pod.Spec.Volumes, token)
	_, err := identity.AdmitPod(ctx, pod)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "volume tok projects a token for audience sts.amazonaws.com, 3600 s")
	keyed := admitter(t, render(t, profileValues(t, "production"), bucketStoreValues(nil)))
	for _, sub := range []string{"", "..data"} {
		_, err := keyed.AdmitPod(ctx, impostor(storePod(t, "plain"), keys, sub))
		require.Error(t, err, "the keys' Secret as the sidecar's context (subPath %q)", sub)
		assert.Contains(t, err.Error(), "container polyaxon-sidecar (polyaxon/polyaxon-sidecar:2.18.0) runs with a command, variable or mount of the polyaxonfile's")
	}
	// The run's own context volume, but a file of it only.
	pod = storePod(t, "plain")
	pod.Spec.Containers[1].VolumeMounts[0].SubPath = storePodsRun
	_, err = keyed.AdmitPod(ctx, pod)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "container polyaxon-sidecar")

	for name, ev := range map[string]*admission.Evaluator{"identity": identity, "keys": keyed} {
		pod := identityPod(t, "plain")
		if name == "keys" {
			pod = storePod(t, "plain")
		}
		share := true
		pod.Spec.ShareProcessNamespace = &share
		_, err := ev.AdmitPod(ctx, pod)
		require.Error(t, err, name)
		assert.Contains(t, err.Error(), "spec.shareProcessNamespace: a run pod may not share one process namespace", name)
	}
}
