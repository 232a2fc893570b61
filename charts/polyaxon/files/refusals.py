# A run's pods are created by a controller (the Job, ReplicaSet or Kubeflow controller), not by
# the agent: when the API server refuses one (an admission policy, Pod Security, the quota or
# the LimitRange), the controller only records a Warning event and retries, and Polyaxon's API
# keeps the run `starting` with no word. This watches those events in the runs' namespace,
# follows the refused object's owners up to the run's polyaxon.com object, reports the run
# `failed` with the API server's message (through the agent's own client and credentials), and
# deletes that object so its controller stops retrying and holds no quota.
#
# Runs in the agent's pod, with the agent's image, ServiceAccount and configuration.
import logging
import os
import sys
import time

from kubernetes import client, watch
from kubernetes.client.rest import ApiException

from polyaxon._k8s.manager.manager import K8sManager
from polyaxon._runner.agent.client import AgentClient
from polyaxon._schemas.lifecycle import LifeCycle, V1Statuses

NAMESPACE = os.environ["POLYAXON_K8S_NAMESPACE"]
IN_CLUSTER = os.environ.get("POLYAXON_K8S_IN_CLUSTER", "true").lower() == "true"
POLYAXON_GROUP = "polyaxon.com"
REASON = "RefusedByKubernetes"

# The objects that create a run's pods, by (group, kind), and how the run's polyaxon.com object
# is found from each with the agent's own rights (those of Polyaxon's chart, no more):
# - read, then its controller owner reference followed: a batch Job, a Deployment;
# - a ReplicaSet (not readable by the agent): its Deployment, whose name it carries before
#   the pod-template hash;
# - a Kubeflow job, a Ray or Dask cluster (not readable by the agent): the run's object of the
#   same name, which the operator gives its child.
READ = {("batch", "Job"): "jobs", ("apps", "Deployment"): "deployments"}
SAME_NAME = {
    ("kubeflow.org", "TFJob"): "kfjobs",
    ("kubeflow.org", "PyTorchJob"): "kfjobs",
    ("kubeflow.org", "MPIJob"): "kfjobs",
    ("ray.io", "RayCluster"): "clusters",
    ("kubernetes.dask.org", "DaskCluster"): "clusters",
}
RUN_OBJECTS = {"Job": "jobs", "Service": "services", "KfJob": "kfjobs", "Cluster": "clusters"}

# Where the agent writes a run's identity on its object (polyaxon _k8s/converter/base).
LABEL_UUID = "app.kubernetes.io/instance"
ANNOTATION_OWNER = "operation.polyaxon.com/owner"
ANNOTATION_PROJECT = "operation.polyaxon.com/project"

log = logging.getLogger("refusals")


def is_refusal(event) -> bool:
    """A controller's failure to create a pod because the API server said no: forbidden (an
    admission policy, Pod Security, the quota, the LimitRange) or invalid (a pod that can never
    be). A timeout or a conflict is not a refusal: the controller's retry may well succeed."""
    message = event.message or ""
    return (
        event.type == "Warning"
        and (event.reason or "").startswith("FailedCreate")
        and (" is forbidden: " in message or " is invalid: " in message)
    )


def group_of(api_version: str) -> str:
    return api_version.split("/")[0] if "/" in api_version else ""


class Reporter:
    def __init__(self):
        K8sManager(namespace=NAMESPACE, in_cluster=IN_CLUSTER)  # loads the agent's credentials
        self.objects = client.CustomObjectsApi()
        self.agent = AgentClient()
        self.reported = set()  # uids of the runs' objects already reported

    def get(self, group: str, version: str, plural: str, name: str):
        try:
            return self.objects.get_namespaced_custom_object(group, version, NAMESPACE, plural, name)
        except ApiException as e:
            if e.status == 404:
                return None
            raise

    def run_object(self, api_version: str, kind: str, name: str):
        """The run's polyaxon.com object behind the named object, with its plural; (None,
        None) when the object is not a run's."""
        group = group_of(api_version)
        if (group, kind) == ("apps", "ReplicaSet"):
            group, kind, name = "apps", "Deployment", name.rpartition("-")[0]
        if (group, kind) in SAME_NAME:
            group, kind = POLYAXON_GROUP, SAME_NAME[(group, kind)]
            return self.get(POLYAXON_GROUP, "v1", kind, name), kind
        if (group, kind) in READ:
            child = self.get(group, "v1", READ[(group, kind)], name)
            owner = next((o for o in (child or {}).get("metadata", {}).get("ownerReferences") or [] if o.get("controller")), None)
            if owner is None or group_of(owner["apiVersion"]) != POLYAXON_GROUP:
                return None, None
            kind, name = owner["kind"], owner["name"]
            group = POLYAXON_GROUP
        if group != POLYAXON_GROUP or kind not in RUN_OBJECTS:
            return None, None
        return self.get(POLYAXON_GROUP, "v1", RUN_OBJECTS[kind], name), RUN_OBJECTS[kind]

    def handle(self, event) -> None:
        if not is_refusal(event):
            return
        ref = event.involved_object
        run, plural = self.run_object(ref.api_version or "", ref.kind or "", ref.name or "")
        if run is None:
            return
        meta = run["metadata"]
        uid = meta["uid"]
        if uid in self.reported or meta.get("deletionTimestamp"):
            return
        uuid = (meta.get("labels") or {}).get(LABEL_UUID)
        owner = (meta.get("annotations") or {}).get(ANNOTATION_OWNER)
        project = (meta.get("annotations") or {}).get(ANNOTATION_PROJECT)
        if not (uuid and owner and project):
            return
        message = "The API server refused a pod of this run ({} {}): {}".format(ref.kind, ref.name, event.message)
        self.report_failed(owner, project, uuid, message)
        self.reported.add(uid)
        log.warning("run %s/%s/%s failed: %s", owner, project, uuid, message)
        try:
            self.objects.delete_namespaced_custom_object(
                POLYAXON_GROUP, "v1", NAMESPACE, plural, meta["name"], propagation_policy="Background"
            )
        except ApiException as e:
            if e.status != 404:
                log.warning("run %s: its object %s stays: %s", uuid, meta["name"], e.reason)

    def report_failed(self, owner: str, project: str, uuid: str, message: str) -> None:
        """Posts the failed status until the API has it. A refusal comes within moments of the
        agent's own statuses for the run, and the API saves a run's statuses by reading and
        writing the whole run: a `scheduled` saved at the same time can write over `failed`.
        The API keeps a final status, so posting it again is harmless."""
        for attempt in range(10):
            self.agent.log_run_status(
                run_owner=owner,
                run_project=project,
                run_uuid=uuid,
                status=V1Statuses.FAILED,
                reason=REASON,
                message=message,
            )
            time.sleep(1 + attempt)
            status = self.agent.client.runs_v1.get_run_statuses(owner, project, uuid).status
            if LifeCycle.is_done(status):
                return
        log.warning("run %s/%s/%s: its status stays %s", owner, project, uuid, status)

    def watch(self) -> None:
        """Every event of the namespace, those already there first; after a lost watch, all
        again (a handled run is skipped by its uid, or gone)."""
        core = client.CoreV1Api()
        delay = 1
        while True:
            try:
                # The server ends the watch after timeout_seconds; a connection lost without a
                # word ends it on the client's read timeout.
                for item in watch.Watch().stream(
                    core.list_namespaced_event, NAMESPACE, timeout_seconds=300, _request_timeout=(10, 330)
                ):
                    if item["type"] in ("ADDED", "MODIFIED"):
                        self.handle(item["object"])
                    delay = 1
            except Exception as e:  # the API server or Polyaxon's API away: try again
                log.warning("watching events in %s: %s; again in %ds", NAMESPACE, e, delay)
                time.sleep(delay)
                delay = min(delay * 2, 30)


if __name__ == "__main__":
    logging.basicConfig(stream=sys.stdout, level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    log.info("reporting refused pods of runs in %s", NAMESPACE)
    Reporter().watch()
