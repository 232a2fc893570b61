package upgrade

import (
	"context"
	"crypto/subtle"
	"fmt"

	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/releaseutil"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
)

// SecretChangeError refuses an upgrade that would write a new value into one of the chart's
// generated Secrets where the old one has been taken in for good: by a server that keeps the
// password it was created with, or by the platform that signs with its secret key.
type SecretChangeError struct {
	// Value is the values path that set the new value; Secret the chart's Secret.
	Value, Secret string
	// Why says what keeps the old value and what would break; Fix what to do, and what
	// --force does.
	Why, Fix string
}

func (e *SecretChangeError) Error() string {
	return fmt.Sprintf("%s differs from the value in Secret %s: %s; fix: %s", e.Value, e.Secret, e.Why, e.Fix)
}

// keptSecret is a value of a generated Secret that an upgrade must not change silently.
type keptSecret struct {
	// component and key find the Secret in the manifest (app.kubernetes.io/component) and the
	// value in it.
	component, key string
	// value is the values path that sets it; inCluster the one that must be true for the
	// guard to apply ("": always; an external server's password is the user's to change).
	value, inCluster string
	// refusal explains the refusal; forced is the warning when --force lets it through.
	refusal func(e *SecretChangeError, g guardContext)
	forced  string
}

// guardContext is what the messages name: the namespace, the new release's manifest and values.
type guardContext struct {
	namespace string
	manifest  string
	values    chartutil.Values
}

// pod is the first pod of the component's StatefulSet, or a placeholder.
func (g guardContext) pod(component string) string {
	if sts := componentStatefulSet(g.manifest, component); sts != nil {
		return sts.Name + "-0"
	}
	return "<" + component + " pod>"
}

// value is a string value of the new release, or a placeholder.
func (g guardContext) value(path string) string {
	if v, err := g.values.PathValue(path); err == nil {
		return fmt.Sprint(v)
	}
	return "<" + path + ">"
}

// keptSecrets are the values the upgrade guards, in the order they are checked.
var keptSecrets = []keptSecret{
	{
		component: "postgresql", key: "postgres-password", value: "postgresql.auth.password", inCluster: "postgresql.enabled",
		refusal: func(e *SecretChangeError, g guardContext) {
			user := g.value("postgresql.auth.username")
			e.Why = "the in-cluster Postgres keeps the password it was initialised with (the Secret only tells the clients), so Polyaxon could no longer reach its database"
			e.Fix = fmt.Sprintf("change it in the server first (kubectl -n %s exec -it %s -c postgresql -- psql -U %s -c \"ALTER USER %s WITH PASSWORD '<new password>'\"), then upgrade with --force, which only writes the new password into the Secret; "+
				"or remove postgresql.auth.password from your values to keep the current one", g.namespace, g.pod("postgresql"), user, user)
		},
		forced: "the Postgres password in Secret %s changes (--force): it must already be the server's password",
	},
	{
		component: "rabbitmq", key: "rabbitmq-password", value: "rabbitmq.auth.password", inCluster: "rabbitmq.enabled",
		refusal: func(e *SecretChangeError, g guardContext) {
			e.Why = "the in-cluster RabbitMQ keeps the password it was created with on its volume (the Secret only tells the clients), so the scheduler and workers could no longer log in to the broker"
			e.Fix = fmt.Sprintf("remove rabbitmq.auth.password from your values to keep the current one; or change it in the broker first (kubectl -n %s exec -it %s -c rabbitmq -- rabbitmqctl change_password %s '<new password>'), then upgrade with --force, "+
				"which only writes the new password into the Secret: a broker still on the old one stays unreachable until its volume is deleted, and the queued tasks with it", g.namespace, g.pod("rabbitmq"), g.value("rabbitmq.auth.username"))
		},
		forced: "the RabbitMQ password in Secret %s changes (--force): it must already be the broker's password, or the broker's volume must be reset (queued tasks are lost)",
	},
	{
		component: "platform", key: "POLYAXON_SECRET_KEY", value: "secrets.secretKey",
		refusal: func(e *SecretChangeError, _ guardContext) {
			e.Why = "Polyaxon signs its users' sessions and other signed values with the secret key, so a new one logs every user out and invalidates what was signed with the old one"
			e.Fix = "remove secrets.secretKey from your values to keep the current one; or upgrade with --force to rotate it: every session ends, the database is not changed"
		},
		forced: "the platform secret key in Secret %s changes (--force): every user's session ends",
	},
}

// guardKeptSecrets compares each kept value the upgrade would write into the chart's Secrets
// with the one in the cluster. Nothing to compare when the server is external, the Secret is
// the user's (existingSecret: the chart renders none) or it does not exist yet.
func (p *pipeline) guardKeptSecrets(ctx context.Context) error {
	if p.next == nil {
		return nil
	}
	vals, err := chartutil.CoalesceValues(p.o.Chart, p.o.Values)
	if err != nil {
		return err
	}
	g := guardContext{namespace: p.o.Release.Namespace(), manifest: p.next.Manifest, values: vals}
	for _, k := range keptSecrets {
		if k.inCluster != "" {
			if on, err := vals.PathValue(k.inCluster); err != nil || on != true {
				continue
			}
		}
		secret, next, ok := secretValue(p.next.Manifest, k.component, k.key)
		if !ok {
			continue
		}
		cur, err := p.o.Release.Kube().CoreV1().Secrets(g.namespace).Get(ctx, secret, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("reading Secret %s/%s to compare %s: %w", g.namespace, secret, k.value, err)
		}
		old, ok := cur.Data[k.key]
		if !ok || subtle.ConstantTimeCompare(old, next) == 1 {
			continue
		}
		if p.o.AllowSecretChange {
			w := fmt.Sprintf(k.forced, secret)
			p.printf("warning: %s", w)
			p.res.Warnings = append(p.res.Warnings, w)
			continue
		}
		e := &SecretChangeError{Value: k.value, Secret: secret}
		k.refusal(e, g)
		return e
	}
	return nil
}

// secretValue finds the chart's Secret of component in a release manifest and the value of key
// in it.
func secretValue(manifest, component, key string) (name string, value []byte, found bool) {
	dec := scheme.Codecs.UniversalDeserializer()
	for _, doc := range releaseutil.SplitManifests(manifest) {
		obj, gvk, derr := dec.Decode([]byte(doc), nil, nil)
		if derr != nil || gvk.Kind != "Secret" {
			continue
		}
		s, ok := obj.(*corev1.Secret)
		if !ok || s.Labels["app.kubernetes.io/component"] != component {
			continue
		}
		if v, ok := s.Data[key]; ok {
			return s.Name, v, true
		}
		if v, ok := s.StringData[key]; ok {
			return s.Name, []byte(v), true
		}
	}
	return "", nil, false
}

// componentStatefulSet finds the chart's StatefulSet of component in a release manifest.
func componentStatefulSet(manifest, component string) *appsv1.StatefulSet {
	dec := scheme.Codecs.UniversalDeserializer()
	for _, doc := range releaseutil.SplitManifests(manifest) {
		obj, _, err := dec.Decode([]byte(doc), nil, nil)
		if sts, ok := obj.(*appsv1.StatefulSet); err == nil && ok && sts.Labels["app.kubernetes.io/component"] == component {
			return sts
		}
	}
	return nil
}
