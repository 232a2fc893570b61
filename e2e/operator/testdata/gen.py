# Writes the golden custom resources in this directory with Polyaxon's own converter, the code
# the agent runs to turn a run into a polyaxon.com/v1 object. Generated once and checked in;
# regenerate after a Polyaxon upgrade (from the repository root):
#
#   POLYAXON_SERVICE=agent POLYAXON_NO_CONFIG=true POLYAXON_K8S_NAMESPACE=polyaxon \
#   POLYAXON_AGENT_RUNS_SA=polyaxon-runs \
#   POLYAXON_AGENT_ARTIFACTS_STORE='{"name":"artifacts","kind":"volume_claim","schema_":{"mountPath":"/plx-artifacts","volumeClaim":"polyaxon-artifacts"}}' \
#   ~/.cache/polyaxon-deploy/polyaxon-2.15.1/bin/python e2e/operator/testdata/gen.py
#
# Each run below is a polyaxonfile operation; the converter's output is written as <name>.json.
import json
import os

from kubernetes.client import ApiClient

from polyaxon import settings
from polyaxon._k8s.executor.executor import Executor

OWNER, PROJECT = "acme", "demo"
HERE = os.path.dirname(os.path.abspath(__file__))

CONTAINER = """
      name: main
      image: python:3.11
      command: [python, -c, "print(1)"]
"""


def replica(indent: str, replicas: int) -> str:
    body = "replicas: {}\ncontainer:{}".format(replicas, CONTAINER.replace("\n      ", "\n  "))
    return "\n".join(indent + line for line in body.splitlines())


RUNS = {
    # A job with a termination: backoffLimit, activeDeadlineSeconds, ttlSecondsAfterFinished.
    "job": ("0f5c2a7e9b6d4c1f8e3a2b1c0d9e8f7a", """
termination: {maxRetries: 2, timeout: 3600, ttl: 600}
component:
  run:
    kind: job
    environment: {labels: {polyaxon-deploy/category: jobs}}
    container:""" + CONTAINER),
    # A notebook-like service with a port and two replicas.
    "service": ("1a2b3c4d5e6f47a8b9c0d1e2f3a4b5c6", """
component:
  run:
    kind: service
    ports: [8888]
    replicas: 2
    container:""" + CONTAINER),
    "tfjob": ("2b3c4d5e6f7a48b9c0d1e2f3a4b5c6d7", """
component:
  run:
    kind: tfjob
    chief:
""" + replica("      ", 1) + """
    worker:
""" + replica("      ", 2) + """
    ps:
""" + replica("      ", 1)),
    "pytorchjob": ("3c4d5e6f7a8b49c0d1e2f3a4b5c6d7e8", """
component:
  run:
    kind: pytorchjob
    cleanPodPolicy: Running
    nProcPerNode: 2
    master:
""" + replica("      ", 1) + """
    worker:
""" + replica("      ", 3)),
    "mpijob": ("4d5e6f7a8b9c40d1e2f3a4b5c6d7e8f9", """
component:
  run:
    kind: mpijob
    slotsPerWorker: 2
    launcher:
""" + replica("      ", 1) + """
    worker:
""" + replica("      ", 2)),
    "raycluster": ("5e6f7a8b9c0d41e2f3a4b5c6d7e8f9a0", """
component:
  run:
    kind: raycluster
    rayVersion: "2.9.0"
    entrypoint: python main.py
    head:
""" + replica("      ", 1) + """
    workers:
      small:
""" + replica("        ", 2)),
    "daskcluster": ("6f7a8b9c0d1e42f3a4b5c6d7e8f9a0b1", """
component:
  run:
    kind: daskcluster
    scheduler:
""" + replica("      ", 1) + """
    worker:
""" + replica("      ", 2)),
}


def main():
    settings.set_agent_config()
    for name, (uuid, body) in RUNS.items():
        content = "version: 1.1\nkind: operation\nname: {}\n{}".format(name, body)
        res = Executor.make_and_convert(
            owner_name=OWNER,
            project_name=PROJECT,
            run_uuid=uuid,
            run_name=name,
            content=content,
            default_sa=settings.AGENT_CONFIG.runs_sa,
        )
        obj = ApiClient().sanitize_for_serialization(res)
        with open(os.path.join(HERE, name + ".json"), "w") as f:
            json.dump(obj, f, indent=2, sort_keys=True)
            f.write("\n")
        print("wrote", name + ".json")


if __name__ == "__main__":
    main()
