package backup

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/chartvalues"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/render"
	"k8s.io/client-go/kubernetes"
)

// ReleaseSecretPassword reads the database password from a Secret.
func ReleaseSecretPassword(ctx context.Context, client kubernetes.Interface, namespace, secret, key string) (string, error) {
	s, err := client.CoreV1().Secrets(namespace).Get(ctx, secret, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("reading the database password from Secret %s/%s: %w", namespace, secret, err)
	}
	v, ok := s.Data[key]
	if !ok {
		return "", fmt.Errorf("Secret %s/%s has no key %q for the database password", namespace, secret, key)
	}
	return string(v), nil
}

// DBSettings is where a release's database is, from its values.
type DBSettings struct {
	// InCluster: the chart runs the database (a StatefulSet or a CloudNativePG Cluster).
	InCluster bool
	// Where is chartvalues.PostgresStatefulSet, PostgresCloudNativePG or PostgresExternal.
	Where       string
	Host        string
	Port        int
	User        string
	Database    string
	SecretName  string
	SecretKey   string
	SSLMode     string
	ClientImage string // postgres image for the external client pod
	// ClientUID is the client image's postgres user (0: the official image's, 999).
	ClientUID int64
}

// The chart's in-cluster PostgreSQL: its Secret's password key and its Service's port are
// fixed by the chart's templates, not values.
const (
	postgresPasswordKey = "postgres-password"
	postgresPort        = 5432
	// cnpgPasswordKey is the password's key in a kubernetes.io/basic-auth Secret.
	cnpgPasswordKey = "password"
)

// DatabaseSettings reads the database location from a release's values.
func DatabaseSettings(names render.Names, v *chartvalues.Values) DBSettings {
	pg := names.Component("postgresql")
	d := DBSettings{
		InCluster:   v.Postgresql.Enabled,
		Where:       v.Postgresql.Where(),
		SecretName:  pg,
		SecretKey:   postgresPasswordKey,
		ClientImage: "postgres:" + string(v.Postgresql.Image.Tag),
	}
	if d.InCluster {
		auth := v.Postgresql.Auth
		d.Host, d.Port, d.User, d.Database = pg, postgresPort, auth.Username, auth.Database
		if d.Where == chartvalues.PostgresCloudNativePG {
			// The operator's read-write Service, which follows the primary; the owner's
			// credentials are in the basic-auth Secret the Cluster was bootstrapped from.
			d.Host, d.SecretName, d.SecretKey = pg+"-rw", pg+"-auth", cnpgPasswordKey
			// The instances' own image: its pg_dump is the server's major, and it is where
			// the Cluster's images come from (its registry, not Docker Hub's).
			d.ClientImage, d.ClientUID = v.OperandImage(), v.Postgresql.CloudNativePG.PostgresUID
		}
		if auth.ExistingSecret != "" {
			d.SecretName = auth.ExistingSecret
		}
		return d
	}
	ext := v.ExternalServices.Postgresql
	d.Host, d.Port, d.User, d.Database = ext.Host, ext.Port, ext.User, ext.Database
	if ext.ExistingSecret != "" {
		d.SecretName, d.SecretKey = ext.ExistingSecret, ext.PasswordKey
	}
	d.SSLMode = ext.Options["sslmode"]
	return d
}
