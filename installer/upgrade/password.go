package upgrade

import (
	"context"
	"crypto/subtle"
	"fmt"

	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/releaseutil"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
)

// postgresPasswordKey is the key of the chart's Postgres Secret that holds the password.
const postgresPasswordKey = "postgres-password"

// PasswordChangeError refuses an upgrade that changes the in-cluster Postgres password: Postgres
// sets it once, when its data directory is created, so a new value would only reach the Secret
// the clients read, and the platform would be locked out of its database.
type PasswordChangeError struct {
	Secret    string
	Namespace string
	Pod       string
	User      string
}

func (e *PasswordChangeError) Error() string {
	return fmt.Sprintf("postgresql.auth.password differs from the password in Secret %s: the in-cluster Postgres keeps the password it was initialised with "+
		"(the Secret only tells the clients), so Polyaxon could no longer reach its database; fix: change it in the server first "+
		"(kubectl -n %s exec -it %s -c postgresql -- psql -U %s -c \"ALTER USER %s WITH PASSWORD '<new password>'\"), then upgrade with --force; "+
		"or remove postgresql.auth.password from your values to keep the current one",
		e.Secret, e.Namespace, e.Pod, e.User, e.User)
}

// guardPostgresPassword compares the password the upgrade would write into the chart's
// Postgres Secret with the one in the cluster. Nothing to compare when Postgres is external,
// the Secret is the user's (existingSecret: the chart renders none) or does not exist yet.
func (p *pipeline) guardPostgresPassword(ctx context.Context) error {
	if p.next == nil {
		return nil
	}
	if _, enabled, err := PostgresMajor(p.o.Chart, p.o.Values); err != nil || !enabled {
		return err
	}
	secret, next, ok, err := postgresPassword(p.next.Manifest)
	if err != nil || !ok {
		return err
	}
	ns := p.o.Release.Namespace()
	cur, err := p.o.Release.Kube().CoreV1().Secrets(ns).Get(ctx, secret, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading Secret %s/%s to compare the Postgres password: %w", ns, secret, err)
	}
	old, ok := cur.Data[postgresPasswordKey]
	if !ok || subtle.ConstantTimeCompare(old, next) == 1 {
		return nil
	}
	if p.o.AllowPasswordChange {
		w := fmt.Sprintf("the Postgres password in Secret %s changes (--force): it must already be the server's password", secret)
		p.printf("warning: %s", w)
		p.res.Warnings = append(p.res.Warnings, w)
		return nil
	}
	e := &PasswordChangeError{Secret: secret, Namespace: ns, Pod: "<postgres pod>", User: "<user>"}
	if sts, err := postgresStatefulSet(p.next.Manifest); err == nil {
		e.Pod = sts.Name + "-0"
	}
	if all, err := chartutil.CoalesceValues(p.o.Chart, p.o.Values); err == nil {
		if u, err := all.PathValue("postgresql.auth.username"); err == nil {
			e.User = fmt.Sprint(u)
		}
	}
	return e
}

// postgresPassword finds the chart's Postgres Secret in a release manifest and the password
// it holds.
func postgresPassword(manifest string) (name string, password []byte, found bool, err error) {
	dec := scheme.Codecs.UniversalDeserializer()
	for _, doc := range releaseutil.SplitManifests(manifest) {
		obj, gvk, derr := dec.Decode([]byte(doc), nil, nil)
		if derr != nil || gvk.Kind != "Secret" {
			continue
		}
		s, ok := obj.(*corev1.Secret)
		if !ok || s.Labels["app.kubernetes.io/component"] != "postgresql" {
			continue
		}
		if v, ok := s.Data[postgresPasswordKey]; ok {
			return s.Name, v, true, nil
		}
		if v, ok := s.StringData[postgresPasswordKey]; ok {
			return s.Name, []byte(v), true, nil
		}
	}
	return "", nil, false, nil
}
