package charts_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
)

const backupKey = "age1ql3z7hjy54pw3hyww5ayyfg7zqgvc7w3j2elw8zmrj2kg5sfn9aqmcac8p"

func backupCronJob(t *testing.T, r rendered) batchv1.CronJob {
	t.Helper()
	o := r.get("CronJob", "polyaxon-backup")
	require.NotNil(t, o, "no CronJob polyaxon-backup")
	var cj batchv1.CronJob
	decodeStrict(t, o, &cj)
	return cj
}

// The documented example on the production profile: a nightly CronJob runs polyaxon-deploy's own
// backup, sealed to the keys given, into the bucket, pruned by the rule; the credentials come
// from the Secret as environment, never through the arguments; one at a time; on the core pool.
func TestScheduledBackupCronJob(t *testing.T) {
	r := render(t, profileValues(t, "production"), exampleValues(t, "scheduled-backups.yaml"),
		yamlValues(t, `backup: {serviceAccount: {annotations: {eks.amazonaws.com/role-arn: "arn:aws:iam::1:role/backups"}}}`))
	cj := backupCronJob(t, r)
	assert.Equal(t, "0 3 * * *", cj.Spec.Schedule)
	assert.Equal(t, "UTC", *cj.Spec.TimeZone)
	assert.Equal(t, batchv1.ForbidConcurrent, cj.Spec.ConcurrencyPolicy)
	assert.Equal(t, int32(0), *cj.Spec.JobTemplate.Spec.BackoffLimit, "a failed backup is recorded, not retried over its own record")
	pod := cj.Spec.JobTemplate.Spec.Template.Spec
	require.Len(t, pod.Containers, 1)
	c := pod.Containers[0]
	assert.Equal(t, "ghcr.io/polyaxon-deploy/polyaxon-deploy:"+loadChart(t).Metadata.Version, c.Image)
	assert.Equal(t, []string{"backup", "--namespace=polyaxon", "--release=polyaxon", "--dir=s3://my-polyaxon-backups/polyaxon",
		"--encrypt-to=" + backupKey, "--keep-last=7", "--keep-within=720h", "--output=json"}, c.Args)
	require.Len(t, c.EnvFrom, 1)
	assert.Equal(t, "polyaxon-backup-s3", c.EnvFrom[0].SecretRef.Name)
	assert.Contains(t, c.Env, corev1.EnvVar{Name: "TMPDIR", Value: "/staging"})
	var staging *corev1.Volume
	for i, v := range pod.Volumes {
		if v.Name == "staging" {
			staging = &pod.Volumes[i]
		}
	}
	require.NotNil(t, staging)
	assert.Equal(t, "20Gi", staging.EmptyDir.SizeLimit.String(), "the staged backup is bounded, not the node's disk")
	assert.Equal(t, "polyaxon-backup", pod.ServiceAccountName)
	assert.Equal(t, "core", pod.NodeSelector["polyaxon"])
	assert.True(t, *c.SecurityContext.ReadOnlyRootFilesystem)

	var sa corev1.ServiceAccount
	decodeStrict(t, r.get("ServiceAccount", "polyaxon-backup"), &sa)
	assert.Equal(t, "arn:aws:iam::1:role/backups", sa.Annotations["eks.amazonaws.com/role-arn"])
}

// The backup's rights are a backup's, in the release's namespace: no wildcard, no write but the
// lock and its own facts, an exec only into the Postgres pod, nothing cluster-wide.
func TestScheduledBackupRights(t *testing.T) {
	r := render(t, exampleValues(t, "scheduled-backups.yaml"))
	var role rbacv1.Role
	decodeStrict(t, r.get("Role", "polyaxon-backup"), &role)
	assert.Equal(t, "polyaxon", role.Namespace)
	writes := map[string]bool{"create": true, "update": true, "patch": true, "delete": true, "deletecollection": true, "*": true}
	for _, rule := range role.Rules {
		assert.NotContains(t, rule.Resources, "*", "rule %v", rule)
		assert.NotContains(t, rule.Verbs, "*", "rule %v", rule)
		for _, res := range rule.Resources {
			switch res {
			case "pods/exec":
				assert.Equal(t, []string{"polyaxon-postgresql-0"}, rule.ResourceNames, "exec only into Postgres")
			case "leases":
				for _, v := range rule.Verbs {
					if v != "create" {
						assert.Equal(t, []string{"polyaxon-polyaxon-deploy-lock"}, rule.ResourceNames, "only its release's lock")
					}
				}
			case "configmaps":
				for _, v := range rule.Verbs {
					if v != "create" {
						assert.Equal(t, []string{"polyaxon-deploy-facts"}, rule.ResourceNames, "only its facts are changed")
					}
				}
			default:
				for _, v := range rule.Verbs {
					assert.False(t, writes[v], "%s may not be written (%v)", res, rule)
				}
			}
		}
	}
	for _, kind := range []string{"ClusterRole", "ClusterRoleBinding"} {
		for _, o := range r.byKind(kind) {
			assert.NotContains(t, o.GetName(), "backup", "nothing cluster-wide for the backup")
		}
	}
	var rb rbacv1.RoleBinding
	decodeStrict(t, r.get("RoleBinding", "polyaxon-backup"), &rb)
	assert.Equal(t, []rbacv1.Subject{{Kind: "ServiceAccount", Name: "polyaxon-backup", Namespace: "polyaxon"}}, rb.Subjects)

	// Off by default: nothing of it renders.
	off := render(t)
	assert.Nil(t, off.get("CronJob", "polyaxon-backup"))
	assert.Nil(t, off.get("Role", "polyaxon-backup"))
}

// On a claim instead of a bucket: mounted at /backups, which is where --dir points.
func TestScheduledBackupOnAClaim(t *testing.T) {
	r := render(t, yamlValues(t, `
backup: {schedule: "@daily", encryptTo: [`+backupKey+`], persistence: {existingClaim: team-backups}}`))
	pod := backupCronJob(t, r).Spec.JobTemplate.Spec.Template.Spec
	assert.Contains(t, pod.Containers[0].Args, "--dir=/backups")
	assert.Empty(t, pod.Containers[0].EnvFrom)
	assert.Contains(t, pod.Containers[0].VolumeMounts, corev1.VolumeMount{Name: "backups", MountPath: "/backups"})
	var claim string
	for _, v := range pod.Volumes {
		if v.PersistentVolumeClaim != nil {
			claim = v.PersistentVolumeClaim.ClaimName
		}
	}
	assert.Equal(t, "team-backups", claim)
}

// Each wrong value is refused at render, naming the value and the fix.
func TestScheduledBackupRefusedAtRender(t *testing.T) {
	prod := profileValues(t, "production")
	base := `schedule: "0 3 * * *", location: s3://team-backups/polyaxon, encryptTo: [` + backupKey + `]`
	cases := []struct {
		name, vals string
		want       []string
	}{
		{"no key", `backup: {schedule: "0 3 * * *", location: s3://team-backups/polyaxon}`,
			[]string{"backup.encryptTo is empty", "age-keygen"}},
		{"nowhere to go", `backup: {schedule: "0 3 * * *", encryptTo: [` + backupKey + `]}`,
			[]string{"backup.location", "backup.persistence.existingClaim"}},
		{"two places", `backup: {` + base + `, persistence: {existingClaim: c}}`,
			[]string{"both set"}},
		{"keeps everything", `backup: {` + base + `, retention: {keepLast: 0, keepWithin: ""}}`,
			[]string{"backup.retention keeps everything", "keepLast"}},
		{"the artifacts store's Secret", `backup: {` + base + `, secret: {name: polyaxon-s3}}
artifactsStore: {kind: s3, bucket: s3://artifacts, secret: {name: polyaxon-s3}}`,
			[]string{"backup.secret.name is \"polyaxon-s3\"", "run pods get"}},
		{"the artifacts store's bucket", `backup: {schedule: "0 3 * * *", location: s3://artifacts/backups, encryptTo: [` + backupKey + `]}
artifactsStore: {kind: s3, bucket: s3://artifacts, secret: {name: polyaxon-s3}}`,
			[]string{"backup.location s3://artifacts/backups is in the artifacts store's bucket"}},
		{"a CronJob name over 52", `backup: {` + base + `}
fullnameOverride: a-release-name-that-is-long-enough-to-fail-the-cronjob`,
			[]string{"over the 52 Kubernetes allows"}},
		{"an external database", `backup: {` + base + `}
postgresql: {enabled: false}
externalServices: {postgresql: {host: db.example.com, password: not-a-secret}}`,
			[]string{"postgresql.enabled is false", "--local"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := renderWith(loadChart(t), mergeValues(prod, yamlValues(t, tc.vals)), false, nil)
			require.Error(t, err)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
	// The schema: a location that is not a bucket, a key that is not age's, a duration that is
	// not Go's, an argument smuggled in a value.
	for _, bad := range []string{
		`backup: {location: "/var/backups"}`,
		`backup: {location: "s3://team-backups/p --no-encrypt"}`,
		`backup: {location: "s3://team-backups/p\n--no-encrypt"}`,
		`backup: {encryptTo: ["ssh-ed25519 AAAA"]}`,
		`backup: {encryptTo: ["age1abc --no-encrypt"]}`,
		`backup: {retention: {keepWithin: "30 days"}}`,
		`backup: {retention: {keepLast: -1}}`,
	} {
		err := validateValues(t, prod, yamlValues(t, bad))
		require.Error(t, err, bad)
		assert.Contains(t, err.Error(), "backup", bad)
	}
}
