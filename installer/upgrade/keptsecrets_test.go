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

// The chart's generated Secrets, reduced to what the guard reads: the real chart reads a
// stored value back (lookup) when none is given; the fixture has no cluster to read, and
// renders "stored-in-cluster" instead.
const keptSecretsTemplate = `{{- if .Values.postgresql.enabled }}
apiVersion: v1
kind: Secret
metadata:
  name: {{ .Release.Name }}-postgresql
  labels:
    app.kubernetes.io/component: postgresql
data:
  postgres-password: {{ dig "auth" "password" "stored-in-cluster" .Values.postgresql | b64enc }}
{{- else }}
---
apiVersion: v1
kind: Secret
metadata:
  name: {{ .Release.Name }}-postgresql
  labels:
    app.kubernetes.io/component: postgresql
data:
  postgres-password: {{ .Values.externalServices.postgresql.password | b64enc }}
{{- end }}
{{- if .Values.rabbitmq.enabled }}
---
apiVersion: v1
kind: Secret
metadata:
  name: {{ .Release.Name }}-rabbitmq
  labels:
    app.kubernetes.io/component: rabbitmq
data:
  rabbitmq-password: {{ dig "auth" "password" "stored-in-cluster" .Values.rabbitmq | b64enc }}
---
apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: {{ .Release.Name }}-rabbitmq
  labels:
    app.kubernetes.io/component: rabbitmq
spec:
  selector:
    matchLabels: {app: rabbitmq}
  template:
    metadata:
      labels: {app: rabbitmq}
    spec:
      containers: [{name: rabbitmq, image: rabbitmq}]
{{- else if .Values.externalServices.rabbitmq.host }}
---
apiVersion: v1
kind: Secret
metadata:
  name: {{ .Release.Name }}-rabbitmq
  labels:
    app.kubernetes.io/component: rabbitmq
data:
  rabbitmq-password: {{ .Values.externalServices.rabbitmq.password | b64enc }}
{{- end }}
---
apiVersion: v1
kind: Secret
metadata:
  name: {{ .Release.Name }}-platform
  labels:
    app.kubernetes.io/component: platform
data:
  POLYAXON_SECRET_KEY: {{ dig "secretKey" "stored-in-cluster" .Values.secrets | b64enc }}
`

// keptSecretCase is one kept value: where the upgrade sets it and where the cluster has it.
type keptSecretCase struct {
	values   func(v map[string]any, next string) // sets the new value in the upgrade's values
	secret   string                              // the chart's Secret
	key      string
	wants    []string                            // in the refusal: the value's path, the Secret, why, and what --force does
	forced   string                              // in the warning under --force
	external func(v map[string]any, next string) // the server is the user's, with a new password: no guard
}

var keptSecretCases = map[string]keptSecretCase{
	"postgres password": {
		values: func(v map[string]any, next string) {
			v["postgresql"].(map[string]any)["auth"] = map[string]any{"password": next, "username": "polyaxon"}
		},
		secret: "polyaxon-postgresql", key: "postgres-password",
		wants: []string{"postgresql.auth.password differs from the value in Secret polyaxon-postgresql", "keeps the password",
			"ALTER USER polyaxon", "-n polyaxon exec -it polyaxon-postgresql-0", "--force, which only writes the new password into the Secret"},
		forced: "the Postgres password in Secret polyaxon-postgresql changes (--force)",
		external: func(v map[string]any, next string) {
			v["postgresql"].(map[string]any)["enabled"] = false
			v["externalServices"] = map[string]any{"postgresql": map[string]any{"host": "db.example", "password": next}}
		},
	},
	"rabbitmq password": {
		values: func(v map[string]any, next string) {
			v["rabbitmq"] = map[string]any{"enabled": true, "auth": map[string]any{"password": next, "username": "polyaxon"}}
		},
		secret: "polyaxon-rabbitmq", key: "rabbitmq-password",
		wants: []string{"rabbitmq.auth.password differs from the value in Secret polyaxon-rabbitmq", "keeps the password it was created with on its volume",
			"could no longer log in to the broker", "exec -it polyaxon-rabbitmq-0 -c rabbitmq -- rabbitmqctl change_password polyaxon",
			"--force, which only writes the new password into the Secret", "until its volume is deleted, and the queued tasks with it"},
		forced: "the RabbitMQ password in Secret polyaxon-rabbitmq changes (--force)",
		external: func(v map[string]any, next string) {
			v["rabbitmq"] = map[string]any{"enabled": false}
			v["externalServices"] = map[string]any{"rabbitmq": map[string]any{"host": "mq.example", "password": next}}
		},
	},
	"platform secret key": {
		values: func(v map[string]any, next string) { v["secrets"] = map[string]any{"secretKey": next} },
		secret: "polyaxon-platform", key: "POLYAXON_SECRET_KEY",
		wants: []string{"secrets.secretKey differs from the value in Secret polyaxon-platform", "logs every user out",
			"remove secrets.secretKey from your values", "--force to rotate it: every session ends"},
		forced: "the platform secret key in Secret polyaxon-platform changes (--force)",
	},
}

// withKeptSecrets gives the upgrade's chart the Secrets, the cluster the stored values, and
// the upgrade next as the value of c.
func withKeptSecrets(s *setup, c keptSecretCase, stored, next string) {
	s.o.Chart.Templates = append(s.o.Chart.Templates, &chart.File{Name: "templates/secrets.yaml", Data: []byte(keptSecretsTemplate)})
	s.o.Chart.Values["rabbitmq"] = map[string]any{"enabled": false}
	s.o.Chart.Values["secrets"] = map[string]any{}
	s.o.Chart.Values["externalServices"] = map[string]any{"postgresql": map[string]any{}, "rabbitmq": map[string]any{}}
	vals := pgValues("16")
	if next != "" {
		c.values(vals, next)
	}
	s.o.Values = vals
	if stored != "" {
		_, _ = s.f.Clientset.CoreV1().Secrets(rt.Namespace).Create(context.Background(), &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: c.secret, Namespace: rt.Namespace},
			Data:       map[string][]byte{c.key: []byte(stored)},
		}, metav1.CreateOptions{})
	}
}

// The in-cluster Postgres and RabbitMQ set their password once, when their volume is created: a
// new password would only change the Secret the clients read, and the platform would lose its
// database or its broker. A new secret key logs every user out. Each upgrade is refused before
// anything changes, with the value's path, why, and what --force does; --force lets it through
// with a warning.
func TestPipelineRefusesKeptSecretChange(t *testing.T) {
	for name, c := range keptSecretCases {
		t.Run(name, func(t *testing.T) {
			s := newSetup(t)
			withKeptSecrets(s, c, "old-value", "new-value")
			_, err := Run(context.Background(), s.o)
			var pe *phase.Error
			require.ErrorAs(t, err, &pe)
			assert.Equal(t, PhaseGuard, pe.Phase)
			var sce *SecretChangeError
			require.ErrorAs(t, err, &sce)
			for _, want := range c.wants {
				assert.Contains(t, err.Error(), want)
			}
			assert.NotContains(t, err.Error(), "old-value")
			assert.NotContains(t, err.Error(), "new-value")
			assert.NotContains(t, s.rec.Events(), "backup", "refused before anything ran")
			assert.Equal(t, map[int]string{1: "deployed"}, s.statuses(t))
			s.lockReleased(t)

			s.o.AllowSecretChange = true
			res, err := Run(context.Background(), s.o)
			require.NoError(t, err, "--force lets it through")
			assert.Contains(t, res.Warnings[len(res.Warnings)-1], c.forced)
		})
	}
}

func TestPipelineAcceptsUnchangedKeptSecrets(t *testing.T) {
	for name, c := range keptSecretCases {
		for what, tc := range map[string]struct{ stored, next string }{
			"same value given again":                     {"same-value", "same-value"},
			"none given: the chart keeps the stored one": {"stored-in-cluster", ""},
			"first value, nothing stored yet":            {"", "first-value"},
		} {
			t.Run(name+": "+what, func(t *testing.T) {
				s := newSetup(t)
				withKeptSecrets(s, c, tc.stored, tc.next)
				_, err := Run(context.Background(), s.o)
				require.NoError(t, err)
			})
		}
		if c.external != nil {
			t.Run(name+": an external server's password is the user's to change", func(t *testing.T) {
				s := newSetup(t)
				withKeptSecrets(s, c, "old-value", "")
				c.external(s.o.Values, "new-value")
				_, err := Run(context.Background(), s.o)
				require.NoError(t, err)
			})
		}
	}
}
