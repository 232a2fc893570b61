// Package cnpg reads the state of a CloudNativePG Cluster (postgresql.mode=cloudnativepg): its
// phase, its instances with their roles and nodes, and how far each replica is behind the
// primary. Read-only: the operator alone changes a Cluster.
package cnpg

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
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
	// statusPort is the instance manager's status server (/pg/status).
	statusPort = "8000"
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
	TargetPrimary string     `json:"targetPrimary,omitempty"`
	Members       []Instance `json:"members"`
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
		Instances int `json:"instances"`
	} `json:"spec"`
	Status struct {
		Phase          string `json:"phase"`
		ReadyInstances int    `json:"readyInstances"`
		CurrentPrimary string `json:"currentPrimary"`
		TargetPrimary  string `json:"targetPrimary"`
	} `json:"status"`
}

// Read reads Cluster name in namespace, its instance pods and, from the primary's instance
// manager (through the API server's pod proxy), each replica's lag. A lag that cannot be read
// leaves LagUnknown set, not an error.
func Read(ctx context.Context, cs kubernetes.Interface, namespace, name string) (*State, error) {
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
		Primary: c.Status.CurrentPrimary, TargetPrimary: c.Status.TargetPrimary}
	sel := labels.SelectorFromSet(labels.Set{LabelCluster: name, LabelPodRole: "instance"}).String()
	pods, err := cs.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, fmt.Errorf("listing the instances of %s/%s (%s): %w", namespace, name, sel, err)
	}
	for _, p := range pods.Items {
		s.Members = append(s.Members, Instance{Pod: p.Name, Node: p.Spec.NodeName, Role: p.Labels[LabelInstanceRole], Ready: podReady(&p)})
	}
	sort.Slice(s.Members, func(i, j int) bool { return s.Members[i].Pod < s.Members[j].Pod })
	if err := s.readLag(ctx, cs, namespace); err != nil {
		s.LagUnknown = err.Error()
	}
	return s, nil
}

// PrimaryPod returns the running primary instance of Cluster name: the pod the operator labels
// primary, which is the one the read-write Service sends connections to.
func PrimaryPod(ctx context.Context, cs kubernetes.Interface, namespace, name string) (string, error) {
	sel := labels.SelectorFromSet(labels.Set{LabelCluster: name, LabelInstanceRole: RolePrimary}).String()
	pods, err := cs.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return "", fmt.Errorf("finding the primary of CloudNativePG Cluster %s/%s (%s): %w", namespace, name, sel, err)
	}
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			return p.Name, nil
		}
	}
	return "", fmt.Errorf("CloudNativePG Cluster %s/%s has no running primary (kubectl -n %s get pods -l %s): a failover may be under way; try again when `polyaxon-deploy status` shows one", namespace, name, namespace, sel)
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// pgStatus is the part of the instance manager's /pg/status read here.
type pgStatus struct {
	CurrentLsn      string `json:"currentLsn"`
	ReplicationInfo []struct {
		ApplicationName string `json:"applicationName"`
		ReplayLsn       string `json:"replayLsn"`
		ReplayLag       string `json:"replayLag"`
	} `json:"replicationInfo"`
}

// readLag asks the primary's instance manager for its replication, over TLS as the operator
// starts new instances, else over plain HTTP (instances started before that).
func (s *State) readLag(ctx context.Context, cs kubernetes.Interface, namespace string) error {
	if s.Primary == "" {
		return errors.New("no primary")
	}
	var raw []byte
	var err error
	for _, scheme := range []string{"https", "http"} {
		raw, err = cs.CoreV1().Pods(namespace).ProxyGet(scheme, s.Primary, statusPort, "/pg/status", nil).DoRaw(ctx)
		if err == nil {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("asking the primary %s for its replication: %w", s.Primary, err)
	}
	var st pgStatus
	if err := json.Unmarshal(raw, &st); err != nil {
		return fmt.Errorf("decoding the primary's status: %w", err)
	}
	current, err := parseLSN(st.CurrentLsn)
	if err != nil {
		return err
	}
	for i := range s.Members {
		m := &s.Members[i]
		for _, r := range st.ReplicationInfo {
			if r.ApplicationName != m.Pod {
				continue
			}
			replayed, err := parseLSN(r.ReplayLsn)
			if err != nil {
				return err
			}
			lag := max(int64(current-replayed), 0)
			m.LagBytes, m.ReplayLag = &lag, r.ReplayLag
		}
	}
	return nil
}

// parseLSN reads a WAL position as Postgres prints it: two hexadecimal halves, "16/B374D848".
func parseLSN(s string) (uint64, error) {
	hi, lo, ok := strings.Cut(s, "/")
	if !ok {
		return 0, fmt.Errorf("WAL position %q: want HI/LO", s)
	}
	h, err := strconv.ParseUint(hi, 16, 32)
	if err != nil {
		return 0, fmt.Errorf("WAL position %q: %w", s, err)
	}
	l, err := strconv.ParseUint(lo, 16, 32)
	if err != nil {
		return 0, fmt.Errorf("WAL position %q: %w", s, err)
	}
	return h<<32 | l, nil
}
