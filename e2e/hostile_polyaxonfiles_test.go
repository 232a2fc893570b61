package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// A hostile polyaxonfile (e2e/testdata/polyaxonfiles/hostile) and what the run's failed status
// must say.
type hostilePolyaxonfile struct {
	file, message string
	// podLevel: the run's object is admitted and its pod refused when the Job controller
	// creates it (Pod Security, the quota); the agent's `refusals` container reports it.
	// Otherwise the runs' objects policy refuses the object the agent creates.
	podLevel bool
}

var hostilePolyaxonfiles = []hostilePolyaxonfile{
	// Issue 37: what is not a run's.
	{file: "secret-volume.yaml", message: "volume platform mounts Secret polyaxon-platform"},
	{file: "secret-env.yaml", message: "reads DB_PASSWORD from Secret polyaxon-postgresql"},
	{file: "secret-envfrom.yaml", message: "loads Secret polyaxon-platform"},
	{file: "postgres-claim.yaml", message: "volume db mounts claim data-pg16-polyaxon-postgresql-0"},
	{file: "ephemeral-volume.yaml", message: "a run pod may not create a claim of its own (ephemeral volume scratch)"},
	{file: "agent-account.yaml", message: "a run pod uses the runs ServiceAccount polyaxon-runs, not polyaxon-agent"},
	{file: "node-name.yaml", message: "a run pod may not pick its node (core-1)"},
	{file: "priority-class.yaml", message: "spec.priorityClassName: system-cluster-critical is not allowed for runs"},
	{file: "outside-dns.yaml", message: "a run pod resolves names with the cluster's DNS only, not 203.0.113.53"},
	// Issue 53: what the hostile review got admitted.
	{file: "any-node.yaml", message: "a run pod must land on a run pool (polyaxon=experiments or polyaxon=builds), and its own nodeSelector or node affinity names none"},
	{file: "every-taint.yaml", message: "spec.tolerations: a toleration with no key (it tolerates every taint)"},
	{file: "node-dns.yaml", message: "spec.dnsPolicy: a run pod resolves names with the cluster's DNS only, not the node's (dnsPolicy Default)"},
	{file: "cloud-token.yaml", message: "volume cloud projects a token for audience sts.amazonaws.com, 31536000 s"},
	{file: "csi-volume.yaml", message: "volume vault is an inline CSI volume of driver secrets-store.csi.k8s.io"},
	{file: "second-network.yaml", message: "metadata.annotations: k8s.v1.cni.cncf.io/networks"},
	// Issue 53: refused only when its pod is created, and left `starting` before.
	{file: "privileged.yaml", podLevel: true, message: `violates PodSecurity "restricted:latest": privileged (container "polyaxon-main" must not set securityContext.privileged=true)`},
	{file: "docker-socket.yaml", podLevel: true, message: `violates PodSecurity "restricted:latest": restricted volume types (volume "docker" uses restricted volume type "hostPath")`},
	{file: "root.yaml", podLevel: true, message: `violates PodSecurity "restricted:latest": runAsNonRoot != true (pod must not set securityContext.runAsNonRoot=false), runAsUser=0 (pod must not set runAsUser=0)`},
}

// assertHostilePolyaxonfilesRefused submits each hostile polyaxonfile through Polyaxon's CLI
// to the project: each run ends failed within a minute, with the API server's reason in its
// status, and a run refused at its pod leaves no Job behind (nothing retries, nothing holds
// the quota).
func assertHostilePolyaxonfilesRefused(t *testing.T, ctx context.Context, cli *polyaxonCLI, cs kubernetes.Interface, ns, runsNS, project, dir string) {
	t.Helper()
	t.Cleanup(func() {
		if t.Failed() {
			logRefusals(t, cs, ns, runsNS)
		}
	})
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	require.NoError(t, err)
	listed := map[string]bool{}
	for _, h := range hostilePolyaxonfiles {
		listed[h.file] = true
	}
	for _, f := range files {
		assert.Truef(t, listed[filepath.Base(f)], "%s is not in hostilePolyaxonfiles: say what its run's status must say", f)
	}
	for _, h := range hostilePolyaxonfiles {
		start := time.Now()
		uuid := cli.submit(t, ctx, filepath.Join(dir, h.file), project)
		msg := cli.waitStatus(t, ctx, project, uuid, "failed")
		took := time.Since(start)
		assert.Lessf(t, took, time.Minute, "%s: failed %s after it was submitted", h.file, took)
		assert.Containsf(t, msg, h.message, "%s: the run's status carries the API server's reason:\n%.600s", h.file, msg)
		t.Logf("%s: failed after %s: %.300s", h.file, took.Round(time.Second), msg)
		if !h.podLevel {
			assert.Containsf(t, msg, "-runs-objects' with binding", "%s: the run objects' policy refused it:\n%.600s", h.file, msg)
			continue
		}
		assert.Containsf(t, msg, "The API server refused a pod of this run", "%s: %.600s", h.file, msg)
		waitFor(t, time.Minute, h.file+": the refused run's Job deleted", func(ctx context.Context) (bool, string, error) {
			jobs, err := cs.BatchV1().Jobs(runsNS).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + uuid})
			if err != nil {
				return false, err.Error(), nil
			}
			return len(jobs.Items) == 0, fmt.Sprintf("%d Jobs left", len(jobs.Items)), nil
		})
	}
}

// logRefusals: the agent's refusals container's log and the Warning events of the runs.
func logRefusals(t *testing.T, cs kubernetes.Interface, ns, runsNS string) {
	ctx := ctxT(t, time.Minute)
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=agent"})
	if err == nil && len(pods.Items) > 0 {
		b, err := cs.CoreV1().Pods(ns).GetLogs(pods.Items[0].Name, &corev1.PodLogOptions{Container: "refusals"}).DoRaw(ctx)
		t.Logf("the agent's refusals container (%v):\n%s", err, lastLines(string(b), 40))
	}
	evs, err := cs.CoreV1().Events(runsNS).List(ctx, metav1.ListOptions{FieldSelector: "type=Warning"})
	if err == nil {
		for _, e := range evs.Items {
			t.Logf("event %s %s/%s: %.300s", e.Reason, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Message)
		}
	}
}
