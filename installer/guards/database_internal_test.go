package guards

import (
	"testing"

	"github.com/stretchr/testify/assert"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// With runs in the release's namespace every account there is a run's; the binding
// CloudNativePG keeps for the release's Cluster (its instances' account to its own Role) is not
// one that widens a run's access, and a look-alike of it is.
func TestTheDatabasesOwnBindingIsNotExtra(t *testing.T) {
	const ns, db = "ml", "polyaxon-postgresql"
	rev := Revision{RunsNamespace: ns, Databases: []string{ns + "/" + db}}
	yes := true
	own := func() *rbacv1.RoleBinding {
		return &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: db, OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "postgresql.cnpg.io/v1", Kind: "Cluster", Name: db, UID: "u", Controller: &yes}}},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: db},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: db, Namespace: ns}},
		}
	}
	assert.True(t, rev.madeForTheDatabase(own()))

	for name, change := range map[string]func(*rbacv1.RoleBinding){
		"another Role": func(rb *rbacv1.RoleBinding) { rb.RoleRef = rbacv1.RoleRef{Kind: "ClusterRole", Name: "edit"} },
		"a run's account beside it": func(rb *rbacv1.RoleBinding) {
			rb.Subjects = append(rb.Subjects, rbacv1.Subject{Kind: "ServiceAccount", Name: "polyaxon-runs", Namespace: ns})
		},
		"another account":            func(rb *rbacv1.RoleBinding) { rb.Subjects[0].Name = "polyaxon-runs" },
		"owned by nobody":            func(rb *rbacv1.RoleBinding) { rb.OwnerReferences = nil },
		"a Cluster of another group": func(rb *rbacv1.RoleBinding) { rb.OwnerReferences[0].APIVersion = "example.com/v1" },
		"another Cluster's name": func(rb *rbacv1.RoleBinding) {
			rb.Name, rb.RoleRef.Name, rb.Subjects[0].Name, rb.OwnerReferences[0].Name = "other", "other", "other", "other"
		},
	} {
		rb := own()
		change(rb)
		assert.False(t, rev.madeForTheDatabase(rb), name)
		assert.NotEmpty(t, rev.binds(rb.Namespace, rb.Subjects, rb.RoleRef), "%s: a binding of the runs' namespace's account is reported", name)
	}
}
