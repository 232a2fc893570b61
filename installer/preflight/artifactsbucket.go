package preflight

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/bucket"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/check"
)

// artifactsBucketFix is the hint of check-artifacts-bucket.
const artifactsBucketFix = "create the bucket artifactsStore.bucket names, or fix artifactsStore.bucket; put keys the store accepts in the Secret artifactsStore.secret.name names, in the release's namespace (kubectl -n NAMESPACE create secret generic NAME --from-literal=AWS_ACCESS_KEY_ID=... --from-literal=AWS_SECRET_ACCESS_KEY=... --from-literal=AWS_REGION=... --from-literal=AWS_DEFAULT_REGION=..., and --from-literal=AWS_ENDPOINT_URL=... for an S3-compatible store), with the right to read, write and delete in the bucket"

// checkArtifactsBucket tries the bucket the artifacts store names (artifactsStore.kind: s3)
// with the keys of the Secret the gateway and Polyaxon's run containers get
// (artifactsStore.secret.name), before anything is installed: a bucket that is not there or
// keys the store refuses would otherwise install fine, and runs would even succeed while their
// sidecar's uploads fail. The endpoint is the Secret's AWS_ENDPOINT_URL (the values give none),
// as it is the pods'. A store this machine cannot reach (an endpoint inside the cluster) is a
// warning. gcs and wasb stores are skipped: installer/bucket speaks S3 only.
func (e *Env) checkArtifactsBucket(ctx context.Context) (string, error) {
	store, ok := e.artifactsStore()
	if !ok {
		return "", check.Skip("no workload runner: no artifacts store")
	}
	switch store.Kind {
	case "s3":
	case "gcs", "wasb":
		return "", check.Skip(fmt.Sprintf("the artifacts store is %s: this check speaks S3 only; the first run's sidecar tells whether %s lets it in", store.Kind, store.Schema.Bucket))
	default:
		return "", check.Skip(fmt.Sprintf("the artifacts store is %s, not a bucket", store.Kind))
	}
	where := store.Schema.Bucket
	loc, err := bucket.ParseLocation(where)
	if err != nil {
		return "", fmt.Errorf("artifactsStore.bucket: %w", err)
	}
	name := store.Secret.Name
	if name == "" {
		// The chart renders a bucket without keys only with artifactsStore.workloadIdentity: the
		// cloud trades the pods' own token, which this machine does not hold.
		return "", check.Skip(fmt.Sprintf("the s3 store %s is reached with the ServiceAccounts' token (artifactsStore.workloadIdentity), which only the cloud can trade: the first run's sidecar tells whether the role takes it", where))
	}
	if store.Secret.MountPath != "" {
		return "", check.Warnf("artifactsStore.secret.mountPath is %s: the keys of Secret %s are files there, not the AWS_* variables this check reads: the first run's sidecar tells whether %s takes them", store.Secret.MountPath, name, where)
	}
	cs, err := e.clientset()
	if err != nil {
		return "", err
	}
	s, err := cs.CoreV1().Secrets(e.Namespace).Get(ctx, name, metav1.GetOptions{})
	if isNotFound(err) {
		return "", fmt.Errorf("artifactsStore.secret.name: Secret %q not found in namespace %q: the gateway would not start and no run could reach %s; create it first (kubectl -n %s create secret generic %s --from-literal=AWS_ACCESS_KEY_ID=... --from-literal=AWS_SECRET_ACCESS_KEY=... [--from-literal=AWS_ENDPOINT_URL=...]), or fix the name",
			name, e.Namespace, where, e.Namespace, name)
	}
	if err != nil {
		return "", fmt.Errorf("reading Secret %s/%s: %w", e.Namespace, name, err)
	}
	answer, err := tryWithSecretKeys(ctx, s, loc)
	switch {
	case err != nil:
		return "", err
	case answer.noKeys:
		return "", fmt.Errorf("artifactsStore.secret.name: Secret %q has no AWS_ACCESS_KEY_ID or AWS_SECRET_ACCESS_KEY (it has %s): no run's outputs or logs would reach %s", name, secretKeys(s), where)
	case answer.refused != nil:
		return "", fmt.Errorf("artifactsStore.bucket %s with the keys of Secret %q (artifactsStore.secret.name): %w", where, name, answer.refused)
	case answer.unreachable != nil:
		return "", check.Warnf("artifactsStore.bucket %s: the store did not answer from here (%v): the check could not try the bucket and the keys of Secret %s; the first run's outputs tell whether they work", where, answer.unreachable, name)
	}
	return fmt.Sprintf("%s is readable and writable with the keys of Secret %s", where, name), nil
}
