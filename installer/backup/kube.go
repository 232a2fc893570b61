package backup

import (
	"cmp"
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/chartvalues"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/render"
)

// LabelComponent tells the release's components apart; the release's own labels come from the
// chart (render.Names).
const (
	LabelComponent = render.LabelComponent

	// PostgresContainer is the container of the chart's postgresql pod.
	PostgresContainer = "postgresql"
	// ReplicasAnnotation remembers replicas while a restore has a Deployment
	// scaled down, so an interrupted restore can be recovered.
	ReplicasAnnotation = "polyaxon-deploy/replicas-before-restore"
)

// Kube is what ReleaseTarget needs to reach the cluster.
type Kube struct {
	Config *rest.Config
	Client kubernetes.Interface
	// Execer overrides exec through the API server (tests).
	Execer Execer
}

func (k Kube) execer() Execer {
	if k.Execer != nil {
		return k.Execer
	}
	return NewExecer(k.Config, k.Client)
}

// TargetOptions tune ReleaseTarget.
type TargetOptions struct {
	// Local runs the client programs on this machine (pg_dump --local).
	Local bool
	// LocalConn overrides fields of the connection used with Local (e.g. a
	// port-forwarded Host/Port). Its Password, when set, is used instead of
	// reading the release's Secret.
	LocalConn Conn
	// LocalBinDir is where the local client programs are (default $PATH).
	LocalBinDir string
	// ClientImage overrides the external client pod's image.
	ClientImage string
	// PodTimeout bounds the external client pod's life (default 2h) and
	// PodStartTimeout its start (default 3m).
	PodTimeout, PodStartTimeout time.Duration
}

// ReleaseTarget returns the Target reaching a release's database: the
// chart's postgresql pod, a short-lived client pod for an external database,
// or local client programs with TargetOptions.Local. Call cleanup when done
// (it deletes the client pod's Job).
func ReleaseTarget(ctx context.Context, k Kube, rel *Release, o TargetOptions) (t Target, cleanup func(context.Context) error, err error) {
	noop := func(context.Context) error { return nil }
	ns, name := rel.Info.Namespace, rel.Info.Name
	db := DatabaseSettings(rel.Names, rel.ChartValues)
	if o.Local {
		conn := Conn{Host: db.Host, Port: db.Port, User: db.User, Database: db.Database, SSLMode: db.SSLMode}
		if db.InCluster {
			conn.Host = "127.0.0.1" // the service name does not resolve here: port-forward
		}
		lc := o.LocalConn
		conn.Host, conn.User, conn.Database, conn.SSLMode = cmp.Or(lc.Host, conn.Host), cmp.Or(lc.User, conn.User), cmp.Or(lc.Database, conn.Database), cmp.Or(lc.SSLMode, conn.SSLMode)
		if lc.Port != 0 {
			conn.Port = lc.Port
		}
		conn.Password = lc.Password
		if conn.Password == "" {
			if conn.Password, err = ReleaseSecretPassword(ctx, k.Client, ns, db.SecretName, db.SecretKey); err != nil {
				return nil, nil, err
			}
		}
		var lo []LocalOption
		if o.LocalBinDir != "" {
			lo = append(lo, WithLocalBinDir(o.LocalBinDir))
		}
		return NewLocalTarget(conn, lo...), noop, nil
	}
	// A CloudNativePG primary moves between pods and its container holds no password: its
	// database is reached as an external one, through the read-write Service, as the owner.
	if db.InCluster && db.Where != chartvalues.PostgresCloudNativePG {
		pod, err := FindPostgresPod(ctx, k.Client, ns, rel.Names)
		if err != nil {
			return nil, nil, err
		}
		return NewPodTarget(k.execer(), ns, pod, PostgresContainer, SourceInCluster), noop, nil
	}
	if db.Host == "" {
		return nil, nil, fmt.Errorf("release %q: postgresql.enabled is false and externalServices.postgresql.host is empty: no database to reach", name)
	}
	if o.ClientImage != "" {
		db.ClientImage = o.ClientImage
	}
	return StartClientPod(ctx, k, ClientPodSpec{
		Namespace: ns, Names: rel.Names, DB: db,
		NodeSelector: rel.ChartValues.NodeSelectors["core"], Tolerations: rel.ChartValues.Tolerations["core"],
		Lifetime: o.PodTimeout, StartTimeout: o.PodStartTimeout,
	})
}

// isNotFound reports a Kubernetes NotFound error.
func isNotFound(err error) bool { return apierrors.IsNotFound(err) }
