package e2e

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster"
)

// refusalsProbe loads the chart's files/refusals.py (argv[1]) in Polyaxon's Python and gives its
// Reporter events about a run's Job, with the run's object and Job as the API server would
// return them; it prints, per case, whether the run was reported failed and its object deleted.
const refusalsProbe = `
import datetime, importlib.util, sys
from kubernetes import client
spec = importlib.util.spec_from_file_location("refusals", sys.argv[1])
m = importlib.util.module_from_spec(spec)
spec.loader.exec_module(m)
UTC = datetime.timezone.utc

class Objects:
    def __init__(self, objs):
        self.objs, self.deleted = objs, []
    def get_namespaced_custom_object(self, group, version, ns, plural, name, _request_timeout=None):
        if (group, plural, name) not in self.objs:
            raise m.ApiException(status=404)
        return self.objs[(group, plural, name)]
    def delete_namespaced_custom_object(self, group, version, ns, plural, name, body=None, _request_timeout=None):
        self.deleted.append(body.preconditions.uid)

def reporter():
    r = m.Reporter.__new__(m.Reporter)
    run = {"metadata": {"name": "plx-operation-u1", "uid": "run-1", "creationTimestamp": "2026-11-29T05:00:00Z",
        "labels": {"app.kubernetes.io/instance": "u1"},
        "annotations": {"operation.polyaxon.com/owner": "default", "operation.polyaxon.com/project": "demo"}}}
    job = {"metadata": {"name": "plx-operation-u1", "uid": "job-1", "ownerReferences": [
        {"apiVersion": "polyaxon.com/v1", "kind": "Job", "name": "plx-operation-u1", "controller": True}]}}
    # A notebook's Deployment, under a polyaxon.com Service; a Kubeflow job's KfJob.
    service = {"metadata": dict(run["metadata"], uid="run-2", labels={"app.kubernetes.io/instance": "u2"})}
    deployment = {"metadata": {"name": "plx-operation-u2", "uid": "deploy-2", "ownerReferences": [
        {"apiVersion": "polyaxon.com/v1", "kind": "Service", "name": "plx-operation-u2", "controller": True}]}}
    kfjob = {"metadata": dict(run["metadata"], uid="run-3", labels={"app.kubernetes.io/instance": "u3"})}
    r.objects = Objects({("polyaxon.com", "jobs", "plx-operation-u1"): run, ("batch", "jobs", "plx-operation-u1"): job,
        ("polyaxon.com", "services", "plx-operation-u2"): service, ("apps", "deployments", "plx-operation-u2"): deployment,
        ("polyaxon.com", "kfjobs", "plx-operation-u3"): kfjob})
    r.handled, r.posted = {}, []
    r.report_failed = lambda owner, project, uuid, message: r.posted.append(uuid)
    return r

def event(message, uid="job-1", at=datetime.datetime(2026, 11, 29, 5, 0, 1, tzinfo=UTC), reason="FailedCreate", kind="Warning",
          about=("batch/v1", "Job", "plx-operation-u1")):
    return client.CoreV1Event(metadata=client.V1ObjectMeta(name="e"), type=kind, reason=reason, message=message, last_timestamp=at,
        involved_object=client.V1ObjectReference(api_version=about[0], kind=about[1], name=about[2], uid=uid))

refused = 'Error creating: pods "p" is forbidden: violates PodSecurity "restricted:latest": privileged'
cases = {
    "pod-security": [event(refused)],
    "invalid": [event('Error creating: Pod "p" is invalid: spec.containers[0].securityContext')],
    "quota-never-fits": [event('Error creating: pods "p" is forbidden: exceeded quota: q, requested: requests.nvidia.com/gpu=64, used: requests.nvidia.com/gpu=0, limited: requests.nvidia.com/gpu=16')],
    "quota-held-by-others": [event('Error creating: pods "p" is forbidden: exceeded quota: q, requested: requests.cpu=2, used: requests.cpu=79, limited: requests.cpu=80')],
    "timeout": [event('Error creating: Timeout: request did not complete within requested timeout')],
    "normal-event": [event(refused, kind="Normal")],
    "another-job-of-the-same-name": [event(refused, uid="job-0")],
    "before-the-run-was-created": [event(refused, at=datetime.datetime(2026, 11, 29, 4, 59, 59, tzinfo=UTC))],
    "twice": [event(refused), event(refused)],
    "a-notebook's-replicaset": [event(refused, uid="rs-2", about=("apps/v1", "ReplicaSet", "plx-operation-u2-5d4f8c9b7"))],
    "a-pytorchjob": [event(refused, uid="pt-3", reason="FailedCreatePod", about=("kubeflow.org/v1", "PyTorchJob", "plx-operation-u3"))],
    "a-replicaset-of-no-run": [event(refused, uid="rs-9", about=("apps/v1", "ReplicaSet", "web-5d4f8c9b7"))],
}
for name, events in cases.items():
    r = reporter()
    for e in events:
        r.handle(e)
    print(name, "failed=" + ",".join(r.posted), "deleted=" + ",".join(r.objects.deleted))
`

// TestRefusalsReportOnlyARunsOwnRefusals: the agent's refusals container (files/refusals.py)
// fails a run for a refusal of its own pod, once, and for nothing else: not for a quota other
// runs fill now (the pod fits when they end), a timeout, an event about an earlier run of the
// same names (a resumed run), or a Normal event. The review of issue 53 found the first version
// failing every run beyond a full quota, and failing a resumed run on its predecessor's event.
func TestRefusalsReportOnlyARunsOwnRefusals(t *testing.T) {
	t.Parallel()
	venv, _ := polyaxonPrograms(t)
	root, err := cluster.RepoRoot()
	require.NoError(t, err)
	cmd := exec.Command(filepath.Join(venv, "bin", "python"), "-c", refusalsProbe, filepath.Join(root, "charts", "polyaxon", "files", "refusals.py"))
	cmd.Env = append(cmd.Environ(), "POLYAXON_K8S_NAMESPACE=polyaxon-runs")
	out, err := cmd.Output()
	require.NoError(t, err, "%s", out)
	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if name, result, ok := strings.Cut(line, " "); ok && strings.HasPrefix(result, "failed=") {
			got[name] = result
		}
	}
	reported := "failed=u1 deleted=run-1"
	assert.Equal(t, map[string]string{
		"pod-security":                 reported,
		"invalid":                      reported,
		"quota-never-fits":             reported,
		"quota-held-by-others":         "failed= deleted=",
		"timeout":                      "failed= deleted=",
		"normal-event":                 "failed= deleted=",
		"another-job-of-the-same-name": "failed= deleted=",
		"before-the-run-was-created":   "failed= deleted=",
		"twice":                        reported,
		"a-notebook's-replicaset":      "failed=u2 deleted=run-2",
		"a-pytorchjob":                 "failed=u3 deleted=run-3",
		"a-replicaset-of-no-run":       "failed= deleted=",
	}, got)
}
