package preflight

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/Masterminds/semver/v3"
	"github.com/google/go-containerregistry/pkg/name"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/chartvalues"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/check"
)

// CloudNativePG, as postgresql.mode=cloudnativepg needs it.
const (
	cnpgGroup = "postgresql.cnpg.io"
	// cnpgOperatorLabel selects the operator's Deployment, in its release manifest and its chart.
	cnpgOperatorLabel = "app.kubernetes.io/name=cloudnative-pg"
	// cnpgVersions are the operator versions whose Cluster takes every field the chart renders
	// (inheritedMetadata, primaryUpdateMethod, enablePDB); the e2e runs 1.28.0.
	cnpgVersions = ">= 1.25.0, < 2.0.0"
	cnpgInstall  = "kubectl apply --server-side -f https://raw.githubusercontent.com/cloudnative-pg/cloudnative-pg/release-1.28/releases/cnpg-1.28.0.yaml (or the cloudnative-pg Helm chart)"
)

const postgresOperatorFix = "install the CloudNativePG operator " + cnpgVersions + " and wait until it is available: " + cnpgInstall + "; or set postgresql.mode=statefulset"

// checkPostgresOperator: with postgresql.mode=cloudnativepg the API server serves
// CloudNativePG's Cluster, and an operator of a supported version runs where the Postgres
// NetworkPolicy lets it reach the instances. Without them Helm would stop at the Cluster, or
// create one nobody runs.
func (e *Env) checkPostgresOperator(ctx context.Context) (string, error) {
	v, err := e.chartValues()
	if err != nil {
		return "", err
	}
	if v.Postgresql.Where() != chartvalues.PostgresCloudNativePG {
		return "", check.Skip("postgresql.mode is not cloudnativepg")
	}
	if e.Clients == nil {
		return "", errors.New("no cluster configured")
	}
	mapper, err := e.Clients.RESTMapper()
	if err != nil {
		return "", err
	}
	if _, err := mapper.RESTMapping(schema.GroupKind{Group: cnpgGroup, Kind: "Cluster"}, "v1"); err != nil {
		if meta.IsNoMatchError(err) {
			return "", fmt.Errorf("postgresql.mode is cloudnativepg but the cluster does not serve CloudNativePG's Cluster (%s/v1): the operator and its CRDs are not installed", cnpgGroup)
		}
		return "", fmt.Errorf("asking the API server for %s/v1 Cluster: %w", cnpgGroup, err)
	}
	cs, err := e.clientset()
	if err != nil {
		return "", err
	}
	want := v.Postgresql.CloudNativePG.OperatorNamespace
	op, err := findCNPGOperator(ctx, cs, want)
	if errors.Is(err, errCannotSeeOperator) {
		// An installer with rights in its own namespaces only: the CRDs are served, which is
		// what Helm needs; the operator is the cluster administrator's.
		if err := e.checkCNPGSecret(ctx, cs, v); err != nil {
			return "", err
		}
		return fmt.Sprintf("CloudNativePG's Cluster is served; the operator in %q is not checked (you may not list Deployments there)", want), nil
	}
	if err != nil {
		return "", err
	}
	if op.Namespace != want {
		return "", fmt.Errorf("the CloudNativePG operator runs in namespace %q, and postgresql.cloudnativepg.operatorNamespace is %q: the Postgres NetworkPolicy would keep the operator from its instances; set postgresql.cloudnativepg.operatorNamespace=%s", op.Namespace, want, op.Namespace)
	}
	if op.Status.AvailableReplicas < 1 {
		return "", fmt.Errorf("the CloudNativePG operator %s/%s has no available pod: its webhooks refuse every Cluster until it has (kubectl -n %s describe deployment %s)", op.Namespace, op.Name, op.Namespace, op.Name)
	}
	version, known := cnpgOperatorVersion(op)
	if known {
		ok, err := cnpgVersionSupported(version)
		if err != nil {
			return "", err
		}
		if !ok {
			return "", fmt.Errorf("the CloudNativePG operator %s/%s is version %s; the chart's Cluster needs %s", op.Namespace, op.Name, version, cnpgVersions)
		}
	}
	if err := e.checkCNPGSecret(ctx, cs, v); err != nil {
		return "", err
	}
	detail := fmt.Sprintf("CloudNativePG's Cluster is served and its operator %s/%s is available", op.Namespace, op.Name)
	if known {
		return detail + " (version " + version + ")", nil
	}
	return detail + " (its version is not in its image's tag: not checked)", nil
}

// errCannotSeeOperator: the user may not list Deployments in the operator's namespace.
var errCannotSeeOperator = errors.New("cannot list the operator's Deployments")

// findCNPGOperator finds the operator's Deployment: in the namespace the values name, else
// anywhere the user may list Deployments (to say where it is).
func findCNPGOperator(ctx context.Context, cs kubernetes.Interface, namespace string) (*appsv1.Deployment, error) {
	for _, ns := range []string{namespace, metav1.NamespaceAll} {
		list, err := cs.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{LabelSelector: cnpgOperatorLabel})
		if apierrors.IsForbidden(err) {
			if ns == metav1.NamespaceAll {
				break
			}
			return nil, errCannotSeeOperator
		}
		if err != nil {
			return nil, fmt.Errorf("listing the CloudNativePG operator's Deployments (%s): %w", cnpgOperatorLabel, err)
		}
		if len(list.Items) > 0 {
			return &list.Items[0], nil
		}
	}
	return nil, fmt.Errorf("the cluster serves CloudNativePG's Cluster, but no operator Deployment (label %s) runs in %q or any namespace you may list: nothing would run the instances", cnpgOperatorLabel, namespace)
}

// cnpgOperatorVersion reads the operator's version from the image its container runs (else
// OPERATOR_IMAGE_NAME): the tag's leading major.minor[.patch], so CloudNativePG's own variants
// (1.28.0-ubi9) read as their version. A tag without one (a digest alone, "1", "latest") is
// not a version.
func cnpgOperatorVersion(d *appsv1.Deployment) (string, bool) {
	for _, c := range d.Spec.Template.Spec.Containers {
		images := []string{c.Image}
		for _, env := range c.Env {
			if env.Name == "OPERATOR_IMAGE_NAME" && env.Value != "" {
				images = append(images, env.Value)
			}
		}
		for _, image := range images {
			if v := leadingVersion.FindString(imageTag(image)); v != "" {
				return strings.TrimPrefix(v, "v"), true
			}
		}
	}
	return "", false
}

// leadingVersion is a tag's version part: v1.28, 1.28.0 of 1.28.0-ubi9.
var leadingVersion = regexp.MustCompile(`^v?\d+\.\d+(\.\d+)?`)

// imageTag is an image reference's tag ("" for none, or a reference that is not one); a
// digest after it is dropped.
func imageTag(image string) string {
	image, _, _ = strings.Cut(image, "@")
	tag, err := name.NewTag(image, name.WithDefaultTag(""))
	if err != nil {
		return ""
	}
	return tag.TagStr()
}

func cnpgVersionSupported(version string) (bool, error) {
	c, err := semver.NewConstraint(cnpgVersions)
	if err != nil {
		return false, err
	}
	v, err := semver.NewVersion(version)
	if err != nil {
		return false, err
	}
	return c.Check(v), nil
}

// checkCNPGSecret: a Secret of the user's (postgresql.auth.existingSecret) is what CloudNativePG
// bootstraps the owner from: keys username and password, username the owner's.
func (e *Env) checkCNPGSecret(ctx context.Context, cs kubernetes.Interface, v *chartvalues.Values) error {
	name := v.Postgresql.Auth.ExistingSecret
	if name == "" {
		return nil
	}
	s, err := cs.CoreV1().Secrets(e.Namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("postgresql.auth.existingSecret names Secret %s/%s, which does not exist: create it (type kubernetes.io/basic-auth, keys username=%s and password)", e.Namespace, name, v.Postgresql.Auth.Username)
	}
	if err != nil {
		return fmt.Errorf("reading Secret %s/%s (postgresql.auth.existingSecret): %w", e.Namespace, name, err)
	}
	var missing []string
	for _, k := range []string{corev1.BasicAuthUsernameKey, corev1.BasicAuthPasswordKey} {
		if len(s.Data[k]) == 0 {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("Secret %s/%s (postgresql.auth.existingSecret) has no %s: CloudNativePG creates the owner from keys username and password", e.Namespace, name, strings.Join(missing, " or "))
	}
	if got := string(s.Data[corev1.BasicAuthUsernameKey]); got != v.Postgresql.Auth.Username {
		return fmt.Errorf("Secret %s/%s (postgresql.auth.existingSecret) has username %q, and postgresql.auth.username is %q: CloudNativePG refuses a Cluster whose owner differs; make them equal", e.Namespace, name, got, v.Postgresql.Auth.Username)
	}
	return nil
}
