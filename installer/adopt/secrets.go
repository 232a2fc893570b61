package adopt

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/chartvalues"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/render"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/values"
)

// The secrets adopt carries over: the platform's secret key (without it every encrypted field
// of the database is unreadable), the internal token, the admin password, and the passwords of
// the in-cluster dependencies. They are written into the Secrets our chart would generate,
// before it is installed, marked as the release's: the chart's lookup then reads them back
// instead of generating new ones, and Helm adopts the objects.

// source is where a carried value comes from in the old release.
type source struct {
	secret, key string
	optional    bool
}

// carried is one Secret of ours and where each of its keys comes from.
type carried struct {
	name      string // our Secret
	component string // its component label
	keys      map[string]source
}

func lookupString(m map[string]any, path string) string {
	v, _ := values.Lookup(m, path)
	if v == nil {
		return ""
	}
	return fmt.Sprint(v)
}

func lookupBool(m map[string]any, path string) bool {
	v, _ := values.Lookup(m, path)
	return v == true
}

// carryPlan lists what adopt writes: our Secrets (from our values: existing Secrets the
// user names are theirs, not ours to fill) and the old release's Secrets they come from.
func carryPlan(names render.Names, ours *chartvalues.Values, old *Old) []carried {
	oldFull := old.Fullname()
	var out []carried
	if ours.Secrets.ExistingSecret == "" {
		admin := oldFull + "-platform-secret"
		if s := lookupString(old.Merged, "platformSecret"); s != "" {
			admin = s
		}
		out = append(out, carried{name: names.PlatformSecret, component: "platform", keys: map[string]source{
			keySecretKey: {secret: oldFull + "-secret", key: keySecretKey},
			keyInternal:  {secret: oldFull + "-secret", key: keyInternal},
			keyAdmin:     {secret: admin, key: keyAdmin, optional: true},
		}})
	}
	if ours.Postgresql.Enabled && ours.Postgresql.Auth.ExistingSecret == "" {
		pg := bitnamiFullname(old.Name, postgresChart)
		if s := lookupString(old.Merged, "postgresql.auth.existingSecret"); s != "" {
			pg = s
		}
		out = append(out, carried{name: names.Component("postgresql"), component: "postgresql", keys: map[string]source{
			keyPGPassword: {secret: pg, key: keyPGPassword},
		}})
	}
	if ours.RabbitMQ.Enabled && lookupBool(old.Merged, "rabbitmq.enabled") && ours.RabbitMQ.Auth.ExistingSecret == "" {
		rb := bitnamiFullname(old.Name, rabbitmqChart)
		out = append(out, carried{name: names.Component("rabbitmq"), component: "rabbitmq", keys: map[string]source{
			keyRabbitPass:   {secret: rb, key: keyRabbitPass, optional: true},
			keyErlangCookie: {secret: rb, key: keyErlangCookie, optional: true},
		}})
	}
	if ours.Redis.Enabled && lookupBool(old.Merged, "redis.enabled") && ours.Redis.Auth.ExistingSecret == "" {
		out = append(out, carried{name: names.Component("redis"), component: "redis", keys: map[string]source{
			keyRedisPass: {secret: bitnamiFullname(old.Name, redisChart), key: keyRedisPass, optional: true},
		}})
	}
	return out
}

// secretCarrier writes the carried Secrets.
type secretCarrier struct {
	kube      kubernetes.Interface
	old       *Old
	ours, ns  string       // our release and namespace
	names     render.Names // our release's names and labels
	plan      []carried
	readCache map[string]*corev1.Secret
}

func (s *secretCarrier) read(ctx context.Context, name string) (*corev1.Secret, error) {
	if sec, ok := s.readCache[name]; ok {
		return sec, nil
	}
	sec, err := s.kube.CoreV1().Secrets(s.old.Namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		sec = nil
	} else if err != nil {
		return nil, fmt.Errorf("reading the old release's Secret %s/%s: %w", s.old.Namespace, name, err)
	}
	if s.readCache == nil {
		s.readCache = map[string]*corev1.Secret{}
	}
	s.readCache[name] = sec
	return sec, nil
}

// data reads the values one Secret of ours gets from the old release's.
func (s *secretCarrier) data(ctx context.Context, c carried) (map[string][]byte, error) {
	out := map[string][]byte{}
	for _, k := range slices.Sorted(maps.Keys(c.keys)) {
		src := c.keys[k]
		sec, err := s.read(ctx, src.secret)
		if err != nil {
			return nil, err
		}
		v, ok := []byte(nil), false
		if sec != nil {
			v, ok = sec.Data[src.key]
		}
		if !ok {
			if src.optional {
				continue
			}
			return nil, fmt.Errorf("the old release's Secret %s/%s has no key %s: without it %s cannot be carried over (encrypted fields would not decrypt)", s.old.Namespace, src.secret, src.key, k)
		}
		out[k] = v
	}
	return out, nil
}

// carry creates our Secrets with the old values. A Secret of ours that exists already must
// hold the same values (an earlier run's); otherwise adopt stops: its values would win.
func (s *secretCarrier) carry(ctx context.Context, rec *Record) error {
	api := s.kube.CoreV1().Secrets(s.ns)
	for _, c := range s.plan {
		data, err := s.data(ctx, c)
		if err != nil {
			return err
		}
		cur, err := api.Get(ctx, c.name, metav1.GetOptions{})
		if err == nil {
			for k, v := range data {
				if !bytes.Equal(cur.Data[k], v) {
					return fmt.Errorf("Secret %s/%s exists already with another %s than the old release's: ours would keep it, and the carried-over data could not be read with it; "+
						"if it was left by an earlier install of ours that holds nothing you need, delete it (kubectl -n %s delete secret %s) and run adopt again", s.ns, c.name, k, s.ns, c.name)
				}
			}
			continue
		}
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("reading Secret %s/%s: %w", s.ns, c.name, err)
		}
		obj := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{
				Name:      c.name,
				Namespace: s.ns,
				Labels:    s.labels(c.component),
				Annotations: map[string]string{
					annReleaseName:               s.ours,
					annReleaseNamespace:          s.ns,
					"helm.sh/resource-policy":    "keep",
					"polyaxon-deploy/adopt-from": s.old.Namespace + "/" + s.old.Name,
				},
			},
			Type: corev1.SecretTypeOpaque,
			Data: data,
		}
		if _, err := api.Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating Secret %s/%s: %w", s.ns, c.name, err)
		}
		if !slices.Contains(rec.Created, c.name) {
			rec.Created = append(rec.Created, c.name)
		}
	}
	return nil
}

// labels are the chart's labels of our component's Secret, and Helm's mark of ownership.
func (s *secretCarrier) labels(component string) map[string]string {
	l := maps.Clone(s.names.Selector)
	if l == nil {
		l = map[string]string{}
	}
	l[render.LabelComponent] = component
	l[labelManagedBy] = "Helm"
	return l
}

// sameSecretKey reports whether our platform Secret holds the old release's secret key.
func (s *secretCarrier) sameSecretKey(ctx context.Context, ourSecret string) (bool, error) {
	old, err := s.read(ctx, s.old.Fullname()+"-secret")
	if err != nil || old == nil {
		return false, err
	}
	mine, err := s.kube.CoreV1().Secrets(s.ns).Get(ctx, ourSecret, metav1.GetOptions{})
	if err != nil {
		return false, fmt.Errorf("reading Secret %s/%s: %w", s.ns, ourSecret, err)
	}
	return len(old.Data[keySecretKey]) > 0 && bytes.Equal(old.Data[keySecretKey], mine.Data[keySecretKey]), nil
}

// uncarry deletes the Secrets carry created.
func (s *secretCarrier) uncarry(ctx context.Context, rec *Record) error {
	for _, name := range rec.Created {
		err := s.kube.CoreV1().Secrets(s.ns).Delete(ctx, name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting Secret %s/%s: %w", s.ns, name, err)
		}
	}
	rec.Created = nil
	return nil
}
