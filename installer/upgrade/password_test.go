package upgrade

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/chart"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/phase"
	rt "github.com/polyaxon-deploy/polyaxon-deploy/installer/release/releasetest"
)

// The chart's Postgres Secret, reduced to what the guard reads.
const pgSecret = `{{- if .Values.postgresql.enabled }}
apiVersion: v1
kind: Secret
metadata:
  name: {{ .Release.Name }}-postgresql
  labels:
    app.kubernetes.io/name: polyaxon
    app.kubernetes.io/instance: {{ .Release.Name }}
    app.kubernetes.io/component: postgresql
data:
  {{- /* the real chart reads the stored value back (lookup); the fixture has no cluster to read */}}
  postgres-password: {{ dig "auth" "password" "stored-in-cluster" .Values.postgresql | b64enc }}
{{- end }}
`

func withPGSecret(s *setup, storedPassword, newPassword string) {
	s.o.Chart.Templates = append(s.o.Chart.Templates, &chart.File{Name: "templates/postgresql/secret.yaml", Data: []byte(pgSecret)})
	vals := pgValues("16")
	if newPassword != "" {
		vals["postgresql"].(map[string]any)["auth"] = map[string]any{"password": newPassword}
	}
	s.o.Values = vals
	if storedPassword != "" {
		_, _ = s.f.Clientset.CoreV1().Secrets(rt.Namespace).Create(context.Background(), &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: rt.Name + "-postgresql", Namespace: rt.Namespace},
			Data:       map[string][]byte{"postgres-password": []byte(storedPassword)},
		}, metav1.CreateOptions{})
	}
}

// Postgres sets its password once, when its data directory is created: a new
// postgresql.auth.password would only change the Secret the clients read, and the platform
// would lose its database. The upgrade is refused before anything changes, unless --force.
func TestPipelineRefusesPostgresPasswordChange(t *testing.T) {
	s := newSetup(t)
	withPGSecret(s, "old-password", "new-password")
	_, err := Run(context.Background(), s.o)
	var pe *phase.Error
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, PhaseGuard, pe.Phase)
	var pwe *PasswordChangeError
	require.ErrorAs(t, err, &pwe)
	for _, want := range []string{"postgresql.auth.password", "Secret polyaxon-postgresql", "keeps the password",
		"ALTER USER", "--force"} {
		assert.Contains(t, err.Error(), want)
	}
	assert.NotContains(t, err.Error(), "old-password")
	assert.NotContains(t, err.Error(), "new-password")
	assert.NotContains(t, s.rec.Events(), "backup", "refused before anything ran")
	assert.Equal(t, map[int]string{1: "deployed"}, s.statuses(t))
	s.lockReleased(t)

	// --force (the password was changed in the server first): the upgrade goes on.
	s.o.AllowPasswordChange = true
	_, err = Run(context.Background(), s.o)
	require.NoError(t, err)
}

func TestPipelineAcceptsUnchangedPostgresPassword(t *testing.T) {
	for name, tc := range map[string]struct{ stored, next string }{
		"same password given again":                  {"same-password", "same-password"},
		"none given: the chart keeps the stored one": {"stored-in-cluster", ""},
		"first password, nothing stored yet":         {"", "first-password"},
	} {
		t.Run(name, func(t *testing.T) {
			s := newSetup(t)
			withPGSecret(s, tc.stored, tc.next)
			_, err := Run(context.Background(), s.o)
			require.NoError(t, err)
		})
	}
}
