// Package cnpg reads the state of a CloudNativePG Cluster (postgresql.mode=cloudnativepg): its
// phase, its instances with their roles and nodes, and how far each replica is behind the
// primary. Read-only but for DeleteClusters (uninstall --purge-data): the operator alone
// changes a Cluster.
package cnpg

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/kubectl/pkg/util/podutils"
)

// HealthyPhase is the phase of a Cluster whose every instance reports and whose reconcile is done
// (the Ready condition is true exactly then).
const HealthyPhase = "Cluster in healthy state"

// Labels the operator sets on its instance pods.
const (
	LabelCluster      = "cnpg.io/cluster"
	LabelPodRole      = "cnpg.io/podRole"
	LabelInstanceRole = "cnpg.io/instanceRole"
	RolePrimary       = "primary"
	groupVersion      = "postgresql.cnpg.io/v1"
)

// ErrNoCluster: the namespace has no Cluster of that name (or the cluster serves no Cluster kind).
var ErrNoCluster = errors.New("no CloudNativePG Cluster")

// Instance is one Postgres instance of a Cluster.
type Instance struct {
	Pod   string `json:"pod"`
	Node  string `json:"node"`
	Role  string `json:"role"`
	Ready bool   `json:"ready"`
	// LagBytes is how much WAL the primary has written that this replica has not replayed
	// (nil: unknown, or the primary itself).
	LagBytes *int64 `json:"lagBytes,omitempty"`
	// ReplayLag is pg_stat_replication's replay_lag as the primary reports it ("" unknown).
	ReplayLag string `json:"replayLag,omitempty"`
}

// State is a Cluster as the operator and its primary report it.
type State struct {
	Cluster   string `json:"cluster"`
	Phase     string `json:"phase"`
	Instances int    `json:"instances"`
	Ready     int    `json:"readyInstances"`
	Primary   string `json:"primary"`
	// TargetPrimary differs from Primary while a switchover or failover is under way.
	TargetPrimary string `json:"targetPrimary,omitempty"`
	// Image is the operand image the Cluster asks for, RunningImage the one its instances run:
	// they differ while the operator rolls an update out.
	Image        string     `json:"image,omitempty"`
	RunningImage string     `json:"runningImage,omitempty"`
	Members      []Instance `json:"members"`
	// LagUnknown says why the replicas' lag could not be read from the primary.
	LagUnknown string `json:"lagUnknown,omitempty"`
}

// Healthy: the operator reports the Cluster healthy with every instance ready.
func (s *State) Healthy() bool { return s.Problem() == "" }

// Problem says what keeps the Cluster from healthy ("" when it is).
func (s *State) Problem() string {
	var out []string
	if s.Phase != HealthyPhase {
		out = append(out, fmt.Sprintf("phase %q", s.Phase))
	}
	if s.Ready < s.Instances {
		out = append(out, fmt.Sprintf("%d of %d instances ready", s.Ready, s.Instances))
	}
	if s.RunningImage != "" && s.Image != "" && s.RunningImage != s.Image {
		out = append(out, fmt.Sprintf("the instances run %s, the Cluster asks for %s", s.RunningImage, s.Image))
	}
	if s.Primary == "" {
		out = append(out, "no primary")
	} else if s.TargetPrimary != "" && s.TargetPrimary != s.Primary {
		out = append(out, fmt.Sprintf("the primary is moving from %s to %s", s.Primary, s.TargetPrimary))
	}
	return strings.Join(out, "; ")
}

// cluster is the part of a Cluster read here.
type cluster struct {
	Spec struct {
		Instances int    `json:"instances"`
		ImageName string `json:"imageName"`
	} `json:"spec"`
	Status struct {
		Image          string `json:"image"`
		Phase          string `json:"phase"`
		ReadyInstances int    `json:"readyInstances"`
		CurrentPrimary string `json:"currentPrimary"`
		TargetPrimary  string `json:"targetPrimary"`
	} `json:"status"`
}

// Read reads Cluster name in namespace, its instance pods and, with lag, each replica's lag as
// the primary reports it. A lag that cannot be read leaves LagUnknown set, not an error.
func Read(ctx context.Context, cs kubernetes.Interface, namespace, name string, lag Exec) (*State, error) {
	// Discovery first: a cluster without CloudNativePG has no Cluster of anyone's.
	if _, err := cs.Discovery().ServerResourcesForGroupVersionWithContext(ctx, groupVersion); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("%w %s/%s (the cluster serves no %s)", ErrNoCluster, namespace, name, groupVersion)
		}
		return nil, fmt.Errorf("asking the API server for %s: %w", groupVersion, err)
	}
	raw, err := cs.CoreV1().RESTClient().Get().
		AbsPath("/apis/postgresql.cnpg.io/v1/namespaces", namespace, "clusters", name).DoRaw(ctx)
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("%w %s/%s", ErrNoCluster, namespace, name)
	}
	if err != nil {
		return nil, fmt.Errorf("reading CloudNativePG Cluster %s/%s: %w", namespace, name, err)
	}
	var c cluster
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, fmt.Errorf("decoding CloudNativePG Cluster %s/%s: %w", namespace, name, err)
	}
	s := &State{Cluster: name, Phase: c.Status.Phase, Instances: c.Spec.Instances, Ready: c.Status.ReadyInstances,
		Primary: c.Status.CurrentPrimary, TargetPrimary: c.Status.TargetPrimary, Image: c.Spec.ImageName, RunningImage: c.Status.Image}
	sel := labels.SelectorFromSet(labels.Set{LabelCluster: name, LabelPodRole: "instance"}).String()
	pods, err := cs.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, fmt.Errorf("listing the instances of %s/%s (%s): %w", namespace, name, sel, err)
	}
	for _, p := range pods.Items {
		s.Members = append(s.Members, Instance{Pod: p.Name, Node: p.Spec.NodeName, Role: p.Labels[LabelInstanceRole], Ready: podutils.IsPodReady(&p)})
	}
	sort.Slice(s.Members, func(i, j int) bool { return s.Members[i].Pod < s.Members[j].Pod })
	if lag != nil {
		if err := s.readLag(ctx, lag, namespace); err != nil {
			s.LagUnknown = err.Error()
		}
	}
	return s, nil
}

// Exec runs command in a container of a pod and returns its standard output.
type Exec func(ctx context.Context, namespace, pod, container string, command []string) (string, error)

// lagQuery is each standby's replay position behind the primary's WAL, in bytes, and its
// replay lag, as the primary reports them; a standby not replaying yet has no position.
const lagQuery = `SELECT application_name, coalesce(pg_wal_lsn_diff(pg_current_wal_lsn(), replay_lsn)::bigint::text, ''), coalesce(replay_lag::text, '0') FROM pg_stat_replication`

// readLag asks the primary's Postgres for its standbys, with psql in its container through the
// kubelet (an exec): the instance manager's status port is for the operator and the instances
// alone, and the Postgres NetworkPolicy keeps it so.
func (s *State) readLag(ctx context.Context, exec Exec, namespace string) error {
	if s.Primary == "" {
		return errors.New("no primary")
	}
	out, err := exec(ctx, namespace, s.Primary, "postgres", []string{"psql", "-U", "postgres", "-d", "postgres", "-AtF", "\t", "-c", lagQuery})
	if err != nil {
		return fmt.Errorf("asking the primary %s for its standbys: %w", s.Primary, err)
	}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Split(line, "\t")
		if len(f) != 3 {
			continue
		}
		for i := range s.Members {
			m := &s.Members[i]
			if m.Pod != f[0] || f[1] == "" {
				continue // not this one, or not replaying yet
			}
			n, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				return fmt.Errorf("the primary's lag of %s: %w", f[0], err)
			}
			n = max(n, 0)
			m.LagBytes, m.ReplayLag = &n, f[2]
		}
	}
	return nil
}

// DeleteClusters deletes the Clusters in namespace that selector selects (a release's), which
// the chart keeps on uninstall: the operator owns their instances' claims, so this deletes the
// data. It returns their names; a cluster that serves no Cluster kind has none.
func DeleteClusters(ctx context.Context, cs kubernetes.Interface, namespace, selector string) ([]string, error) {
	if _, err := cs.Discovery().ServerResourcesForGroupVersionWithContext(ctx, groupVersion); apierrors.IsNotFound(err) {
		return nil, nil
	}
	path := "/apis/" + groupVersion + "/namespaces/" + namespace + "/clusters"
	raw, err := cs.CoreV1().RESTClient().Get().AbsPath(path).Param("labelSelector", selector).DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing CloudNativePG Clusters in %s (%s): %w", namespace, selector, err)
	}
	var list struct {
		Items []metav1.PartialObjectMetadata `json:"items"`
	}
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, fmt.Errorf("decoding CloudNativePG Clusters of %s: %w", namespace, err)
	}
	var deleted []string
	for _, c := range list.Items {
		err := cs.CoreV1().RESTClient().Delete().AbsPath(path, c.Name).Do(ctx).Error()
		if err != nil && !apierrors.IsNotFound(err) {
			return deleted, fmt.Errorf("deleting CloudNativePG Cluster %s/%s: %w", namespace, c.Name, err)
		}
		deleted = append(deleted, c.Name)
	}
	return deleted, nil
}
