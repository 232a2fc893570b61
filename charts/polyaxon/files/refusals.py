# A run's pods are created by a controller (the Job, ReplicaSet or Kubeflow controller), not by
# the agent: when the API server refuses one (an admission policy, Pod Security, the quota or
# the LimitRange), the controller only records a Warning event and retries, and Polyaxon's API
# keeps the run `starting` with no word. This watches those events in the runs' namespace,
# follows the refused object's owners up to the run's polyaxon.com object, reports the run
# `failed` with the API server's message (through the agent's own client and credentials), and
# deletes that object so its controller stops retrying and holds no quota. A pod refused only
# because other runs hold the quota now is not a refusal: it could fit when they end, and its
# controller's retries create it then (the run waits, as it would for a free node).
#
# Runs in the agent's pod, with the agent's image, ServiceAccount and configuration.
import logging
import os
import re
import sys
import time
from datetime import datetime

from kubernetes import client, watch
from kubernetes.client.rest import ApiException
from kubernetes.utils import parse_quantity

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
    ("kubeflow.org", "TFJob"): "KfJob",
    ("kubeflow.org", "PyTorchJob"): "KfJob",
    ("kubeflow.org", "MPIJob"): "KfJob",
    ("ray.io", "RayCluster"): "Cluster",
    ("kubernetes.dask.org", "DaskCluster"): "Cluster",
}
RUN_OBJECTS = {"Job": "jobs", "Service": "services", "KfJob": "kfjobs", "Cluster": "clusters"}

# Where the agent writes a run's identity on its object (polyaxon _k8s/converter/base).
LABEL_UUID = "app.kubernetes.io/instance"
ANNOTATION_OWNER = "operation.polyaxon.com/owner"
ANNOTATION_PROJECT = "operation.polyaxon.com/project"

log = logging.getLogger("refusals")


# `exceeded quota: <name>, requested: k=v,..., used: k=v,..., limited: k=v,...` (the API
# server's quota admission).
QUOTA = re.compile(r"exceeded quota: [^,]+, requested: (\S+), used: (\S+), limited: (\S+)")
TIMEOUT = 30  # seconds, for each call to the API server
ATTEMPTS = 3  # handlings of one run's refusal before it is left to the logs


def is_refusal(event) -> bool:
    """A controller's failure to create a pod because the API server said no: forbidden (an
    admission policy, Pod Security, the quota, the LimitRange) or invalid (a pod that can never
    be). A timeout or a conflict is not a refusal: the controller's retry may well succeed.
    Neither is a quota that other runs fill now (see waits_for_quota)."""
    message = event.message or ""
    reason = event.reason or ""
    return (
        event.type == "Warning"
        and (reason.startswith("FailedCreate") or reason.startswith("FailedToCreate"))
        and (" is forbidden: " in message or " is invalid: " in message)
        and not waits_for_quota(message)
    )


def waits_for_quota(message: str) -> bool:
    """The quota refused the pod, and it asks for no more than the quota allows in all: it fits
    once other runs release what they hold."""
    m = QUOTA.search(message)
    if m is None:
        return False
    requested, limited = amounts(m.group(1)), amounts(m.group(3))
    return all(name in limited and amount <= limited[name] for name, amount in requested.items())


def amounts(text: str) -> dict:
    out = {}
    for item in text.split(","):
        name, _, value = item.partition("=")
        try:
            out[name] = parse_quantity(value)
        except ValueError:
            out[name] = float("inf")  # unreadable: assume it does not fit
    return out


def when(event):
    """When the event last happened (series and old-style events say it in different fields)."""
    series = getattr(event, "series", None)
    return (
        (series.last_observed_time if series else None)
        or event.last_timestamp
        or event.event_time
        or event.metadata.creation_timestamp
    )


def group_of(api_version: str) -> str:
    return api_version.split("/")[0] if "/" in api_version else ""


class Reporter:
    def __init__(self):
        K8sManager(namespace=NAMESPACE, in_cluster=IN_CLUSTER)  # loads the agent's credentials
        self.objects = client.CustomObjectsApi()
        self.agent = AgentClient()
        self.handled = {}  # uid of a run's object: how many times its refusal was handled

    def get(self, group: str, version: str, plural: str, name: str):
        try:
            return self.objects.get_namespaced_custom_object(
                group, version, NAMESPACE, plural, name, _request_timeout=TIMEOUT
            )
        except ApiException as e:
            if e.status == 404:
                return None
            raise

    def run_object(self, ref):
        """The run's polyaxon.com object behind the event's object, with its plural; (None,
        None) when the object is not a run's, or is not the one the event is about (a run
        resumed under the same names since)."""
        group, kind, name, uid = group_of(ref.api_version or ""), ref.kind or "", ref.name or "", ref.uid
        if (group, kind) == ("apps", "ReplicaSet"):
            # Its Deployment, whose uid the event does not give.
            group, kind, name, uid = "apps", "Deployment", name.rpartition("-")[0], None
        if (group, kind) in READ:
            meta = (self.get(group, "v1", READ[(group, kind)], name) or {}).get("metadata", {})
            if uid and meta.get("uid") != uid:
                return None, None
            owner = next((o for o in meta.get("ownerReferences") or [] if o.get("controller")), None)
            if owner is None:
                return None, None
            # A Job of a Kubeflow job (the MPI launcher) leads to that job.
            group, kind, name = group_of(owner["apiVersion"]), owner["kind"], owner["name"]
        if (group, kind) in SAME_NAME:
            group, kind = POLYAXON_GROUP, SAME_NAME[(group, kind)]
        if group != POLYAXON_GROUP or kind not in RUN_OBJECTS:
            return None, None
        return self.get(POLYAXON_GROUP, "v1", RUN_OBJECTS[kind], name), RUN_OBJECTS[kind]

    def handle(self, event) -> None:
        if not is_refusal(event):
            return
        ref = event.involved_object
        run, plural = self.run_object(ref)
        if run is None:
            return
        meta = run["metadata"]
        uid = meta["uid"]
        if self.handled.get(uid, 0) >= ATTEMPTS or meta.get("deletionTimestamp"):
            return
        happened, created = when(event), meta.get("creationTimestamp")
        if happened is not None and created and happened.replace(microsecond=0) < datetime.fromisoformat(created.replace("Z", "+00:00")):
            return  # about an earlier run of the same names
        self.handled[uid] = self.handled.get(uid, 0) + 1
        uuid = (meta.get("labels") or {}).get(LABEL_UUID)
        owner = (meta.get("annotations") or {}).get(ANNOTATION_OWNER)
        project = (meta.get("annotations") or {}).get(ANNOTATION_PROJECT)
        if not (uuid and owner and project):
            return
        message = "The API server refused a pod of this run ({} {}): {}".format(ref.kind, ref.name, event.message)
        self.report_failed(owner, project, uuid, message)
        self.handled[uid] = ATTEMPTS
        log.warning("run %s/%s/%s failed: %s", owner, project, uuid, message)
        try:
            self.objects.delete_namespaced_custom_object(
                POLYAXON_GROUP,
                "v1",
                NAMESPACE,
                plural,
                meta["name"],
                body=client.V1DeleteOptions(propagation_policy="Background", preconditions=client.V1Preconditions(uid=uid)),
                _request_timeout=TIMEOUT,
            )
        except ApiException as e:
            if e.status not in (404, 409):
                log.warning("run %s: its object %s stays: %s", uuid, meta["name"], e.reason)

    def report_failed(self, owner: str, project: str, uuid: str, message: str) -> None:
        """Posts the failed status until the API has it. A refusal comes within moments of the
        agent's own statuses for the run, and the API saves a run's statuses by reading and
        writing the whole run: a `scheduled` saved at the same time can write over `failed`.
        The API keeps a final status, so posting it again is harmless."""
        for attempt in range(5):
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
        """The namespace's Warning events, those already there first, then each as it comes;
        a watch that ends goes on from where it was (all again only when the API server no
        longer has that point). One event that cannot be handled is logged and passed."""
        core = client.CoreV1Api()
        delay, version = 1, None
        while True:
            w = watch.Watch()
            try:
                # The server ends the watch after timeout_seconds; a connection lost without a
                # word ends it on the client's read timeout.
                kwargs = {"resource_version": version} if version else {}
                for item in w.stream(
                    core.list_namespaced_event,
                    NAMESPACE,
                    field_selector="type=Warning",
                    timeout_seconds=300,
                    _request_timeout=(10, 330),
                    **kwargs,
                ):
                    delay = 1
                    if item["type"] not in ("ADDED", "MODIFIED"):
                        continue
                    try:
                        self.handle(item["object"])
                    except Exception as e:  # Polyaxon's API or the API server: logged, passed
                        log.warning("event %s: %s", item["object"].metadata.name, e)
                version = w.resource_version
            except ApiException as e:
                if e.status == 410:  # expired: list again
                    version = None
                    continue
                log.warning("watching events in %s: %s; again in %ds", NAMESPACE, e, delay)
                time.sleep(delay)
                delay = min(delay * 2, 30)
            except Exception as e:  # the API server away: try again
                log.warning("watching events in %s: %s; again in %ds", NAMESPACE, e, delay)
                time.sleep(delay)
                delay = min(delay * 2, 30)


if __name__ == "__main__":
    logging.basicConfig(stream=sys.stdout, level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    log.info("reporting refused pods of runs in %s", NAMESPACE)
    Reporter().watch()
