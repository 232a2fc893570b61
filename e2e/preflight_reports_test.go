package e2e

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster/local"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

const (
	limitedSA     = "e2e-limited"
	defaultSCAnno = "storageclass.kubernetes.io/is-default-class"
)

// TestPreflightReportsEveryProblem: three things wrong at once: the chart supports only Kubernetes
// <1.20.0 (a chart copy), the identity may read the cluster but create almost nothing (a
// ServiceAccount with a tiny Role, used through a kubeconfig holding its token), and no
// StorageClass is the default. One `check --pre` run reports each by its check ID, and an
// install with the same input is refused without creating anything. Each condition alone is
// then checked too, so a failure says which check does not work.
func TestPreflightReportsEveryProblem(t *testing.T) {
	sideBySide(t, controlPlaneOnly) // a cluster of its own (package doc)
	c := newCluster(t, "preflight")
	ns := nsInstall
	oldChart := chartCopy(t, map[string]string{"kubeVersion": "<1.20.0"})
	limited := limitedKubeconfig(t, c, ns)
	setDefaultStorageClass(t, c, false)
	before := takeSnapshot(t, c)

	t.Run("all at once", func(t *testing.T) {
		res := deploy(t, "check", "--pre", "--kubeconfig", limited, "--chart", oldChart, "-o", "json").requireExit(t, 3)
		failed := failedChecks(res.result(t))
		for _, id := range []string{"kube-version", "rbac", "storage-class"} {
			assert.Containsf(t, failed, id, "one run reports every failure\n%s", res)
		}

		res = deploy(t, "install", "--kubeconfig", limited, "--chart", oldChart, "-o", "json").requireExit(t, 3)
		failed = failedChecks(res.result(t))
		for _, id := range []string{"kube-version", "rbac", "storage-class"} {
			assert.Containsf(t, failed, id, "install reports every failure\n%s", res)
		}
		requireNothingCreated(t, c, before)
	})

	t.Run("missing default StorageClass alone", func(t *testing.T) {
		res := c.deploy(t, "check", "--pre", "-o", "json").requireExit(t, 3)
		r := res.result(t)
		assert.Equal(t, []string{"storage-class"}, failedChecks(r))
		assert.Contains(t, checkDetail(r, "storage-class"), "default")
	})

	setDefaultStorageClass(t, c, true)

	t.Run("missing RBAC alone", func(t *testing.T) {
		res := deploy(t, "check", "--pre", "--kubeconfig", limited, "-o", "json").requireExit(t, 3)
		r := res.result(t)
		assert.Contains(t, failedChecks(r), "rbac")
		detail := checkDetail(r, "rbac")
		for _, want := range []string{"cannot create statefulsets.apps", "cannot create deployments.apps", "cannot create roles.rbac.authorization.k8s.io"} {
			assert.Contains(t, detail, want)
		}
		assert.NotContains(t, detail, "cannot create configmaps", "the Role allows ConfigMaps")
	})

	t.Run("unsupported Kubernetes version alone", func(t *testing.T) {
		res := c.deploy(t, "check", "--pre", "--chart", oldChart, "-o", "json").requireExit(t, 3)
		r := res.result(t)
		assert.Equal(t, []string{"kube-version"}, failedChecks(r))
		assert.Contains(t, checkDetail(r, "kube-version"), "<1.20.0")
	})
}

// limitedKubeconfig creates namespace ns and a ServiceAccount that may read what the
// preflight checks read (nodes, pods, StorageClasses, IngressClasses, CRDs) and, in ns,
// read everything but write only ConfigMaps, Secrets and Services. It returns a kubeconfig
// that authenticates with the account's token.
func limitedKubeconfig(t *testing.T, c *testCluster, ns string) string {
	t.Helper()
	ctx := ctxT(t, time.Minute)
	cs := c.Clientset
	_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: limitedSA}}, metav1.CreateOptions{})
	require.NoError(t, err)
	read := []string{"get", "list", "watch"}
	_, err = cs.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: limitedSA + "-read"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"nodes", "pods", "namespaces", "persistentvolumes"}, Verbs: read},
			{APIGroups: []string{"storage.k8s.io"}, Resources: []string{"storageclasses"}, Verbs: read},
			{APIGroups: []string{"networking.k8s.io"}, Resources: []string{"ingressclasses"}, Verbs: read},
			{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"}, Verbs: read},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	subject := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: limitedSA, Namespace: ns}}
	_, err = cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: limitedSA + "-read"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: limitedSA + "-read"},
		Subjects:   subject,
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = cs.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: limitedSA},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: read},
			{APIGroups: []string{""}, Resources: []string{"configmaps", "secrets", "services"}, Verbs: []string{"create", "update", "patch", "delete"}},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = cs.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: limitedSA},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: limitedSA},
		Subjects:   subject,
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	tok, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, limitedSA, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptrTo(int64(3600))},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	cfg, err := clientcmd.LoadFromFile(c.KubeconfigPath)
	require.NoError(t, err)
	kctx := cfg.Contexts[cfg.CurrentContext]
	require.NotNil(t, kctx, "current context of %s", c.KubeconfigPath)
	cfg.AuthInfos = map[string]*clientcmdapi.AuthInfo{limitedSA: {Token: tok.Status.Token}}
	kctx.AuthInfo = limitedSA
	path := filepath.Join(t.TempDir(), "limited.kubeconfig")
	require.NoError(t, clientcmd.WriteToFile(*cfg, path))
	return path
}

// setDefaultStorageClass adds or removes the default-class annotation of the local
// provider's StorageClass.
func setDefaultStorageClass(t *testing.T, c *testCluster, on bool) {
	t.Helper()
	ctx := ctxT(t, time.Minute)
	sc, err := c.Clientset.StorageV1().StorageClasses().Get(ctx, local.StorageClassName, metav1.GetOptions{})
	require.NoError(t, err)
	if on {
		if sc.Annotations == nil {
			sc.Annotations = map[string]string{}
		}
		sc.Annotations[defaultSCAnno] = "true"
	} else {
		delete(sc.Annotations, defaultSCAnno)
	}
	_, err = c.Clientset.StorageV1().StorageClasses().Update(ctx, sc, metav1.UpdateOptions{})
	require.NoError(t, err)
}
