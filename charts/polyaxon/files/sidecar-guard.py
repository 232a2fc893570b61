# Polyaxon's sidecar, kept to its own run (after store-guard.py, in the same program). The
# sidecar holds the artifacts bucket's keys and uploads what the run's own container leaves
# under the artifacts context, which that container may fill as it likes:
# - a link there (outputs/environ -> /proc/self/environ) was followed, and the sidecar's own
#   environment, keys included, uploaded as the run's output: store-guard refuses every link
#   under the context, and leaves links out of its listings;
# - what the run writes under _related_runs/<uuid>/, or names in a forged file-watcher state,
#   was uploaded to or deleted from <bucket>/<uuid>/, another run's folder: every write and
#   delete the sidecar sends must fall in this run's own folder.
# It never asks the Kubernetes API server, which the runs' NetworkPolicy keeps runs from:
# Polyaxon's own sidecar reads its pod there at start, asks it whether the main container still
# runs, and reads the run's logs, and without it uploads nothing. The mutating admission policy
# of the runs (runs/mutatingadmissionpolicy.yaml) makes this the sidecar's command, `python -c
# <this> <Polyaxon's sidecar arguments>`, and makes the sidecar a native one (an init container
# that restarts Always): the kubelet sends it SIGTERM once the run's containers ended, and it
# uploads the outputs one last time then. The run's logs it reads from the API server only
# where runs may reach it, after the outputs and within a bound; elsewhere Polyaxon collects
# them when the run ends.
import re
import signal
import sys

# The kubelet may stop this sidecar before its loop runs (a run that ends at once): a SIGTERM
# then is remembered, not fatal, and the loop uploads once and stops.
_TERMINATED = []
signal.signal(signal.SIGTERM, lambda signum, frame: _TERMINATED.append(signum))

_CONTEXT = os.path.join(os.environ.get("POLYAXON_CONTEXT_ROOT") or "/plx-context", "artifacts")
_RUN = (os.environ.get("POLYAXON_RUN_INSTANCE") or "").rsplit(".", 1)[-1]
if not re.fullmatch(r"[0-9a-f]{32}", _RUN):
    sys.exit("sidecar guard: POLYAXON_RUN_INSTANCE names no run: %r" % os.environ.get("POLYAXON_RUN_INSTANCE"))
install(_CONTEXT)


import json  # noqa: E402

import polyaxon._fs.async_manager as _manager  # noqa: E402
from polyaxon._connections import V1Connection  # noqa: E402
from polyaxon._fs.fs import get_artifacts_connection  # noqa: E402

# A bucket is the chart's (_CHART_STORE, rendered before this program), not the one the
# connection catalog in the environment names: a sidecar of the polyaxonfile's own, shaped as
# Polyaxon's and given the keys, would name another bucket, prefix or endpoint there. A claim's
# path is the container's mount, which the catalog says where the pod is run.
_CHART = json.loads(_CHART_STORE)
if _CHART.get("kind") in ("s3", "gcs", "wasb"):
    _CONNECTION = V1Connection.from_dict(_CHART)
else:
    _CONNECTION = get_artifacts_connection()
# Where the sidecar sends the run's files: <the store's path>/<run uuid>/...
_STORE = _CONNECTION.store_path
_FOLDER = _STORE.rstrip("/") + "/" + _RUN


def _own_run(path):
    path = str(path)
    return (path == _FOLDER or path.startswith(_FOLDER + "/")) and ".." not in path.split("/")


_send = _manager.ensure_async_execution


async def _own_run_only(fs, fct, is_async=False, *args, **kwargs):
    # sync_fs's rm_file, rm and put name the store's side as `path` or `rpath`.
    for key in ("path", "rpath"):
        if key in kwargs and not _own_run(kwargs[key]):
            raise PermissionError("sidecar guard: %s of %s refused: not in run %s's folder" % (fct, kwargs[key], _RUN))
    return await _send(fs, fct, is_async, *args, **kwargs)


# Replaced before the sidecar's modules import it by name.
_manager.ensure_async_execution = _own_run_only

import argparse  # noqa: E402
import asyncio  # noqa: E402

from clipped.utils.tz import now  # noqa: E402
from polyaxon._contexts import paths as _paths  # noqa: E402
from polyaxon._env_vars.getters import get_run_info  # noqa: E402
from polyaxon._fs.fs import close_fs, get_async_fs_from_connection  # noqa: E402
from polyaxon._fs.watcher import FSWatcher  # noqa: E402
from polyaxon._sidecar.container.monitors import sync_artifacts, sync_logs  # noqa: E402
from polyaxon._sidecar.ignore import IGNORE_FOLDERS  # noqa: E402
from polyaxon.client import RunClient  # noqa: E402

# Polyaxon's sidecar arguments (the runs' validating policy admits these only).
_parser = argparse.ArgumentParser(prog="sidecar guard")
_parser.add_argument("--container-id", default="")
_parser.add_argument("--sleep-interval", type=int, default=2)
_parser.add_argument("--sync-interval", type=int, default=-1)
_parser.add_argument("--monitor-logs", action="store_true")
_parser.add_argument("--monitor-spec", action="store_true")
_ARGS = _parser.parse_args(sys.argv[1:])
# Polyaxon syncs every sync interval, checked every sleep interval; none is every check.
_EVERY = max(1, _ARGS.sleep_interval, _ARGS.sync_interval)
# The store's client is made again every two hours, as Polyaxon's sidecar does.
_REFRESH = 2 * 60 * 60
# How long a pass may wait on the API server for the run's logs: where the runs'
# NetworkPolicy drops the packets, a connection would wait minutes, past the pod's grace.
_LOGS_WAIT = 5


def _say(message):
    print("sidecar guard: " + message, file=sys.stderr, flush=True)


async def _upload(fs, fw):
    try:
        await sync_artifacts(fs=fs, fw=fw, store_path=_STORE, run_uuid=_RUN, exclude=IGNORE_FOLDERS)
    except Exception as e:  # the next sync tries again; the last one is logged
        _say("uploading the outputs: %r" % e)


async def _sync(fs, fw, client, state):
    await _upload(fs, fw)
    try:
        client.sync_events_summaries(
            last_check=state.get("events"), events_path=_paths.CONTEXT_MOUNT_RUN_EVENTS_FORMAT.format(_RUN))
        client.sync_system_events_summaries(
            last_check=state.get("events"),
            events_path=_paths.CONTEXT_MOUNT_RUN_SYSTEM_RESOURCES_EVENTS_FORMAT.format(_RUN))
        state["events"] = now()
    except Exception as e:
        _say("sending the events' summaries to the API: %r" % e)
    if _ARGS.monitor_logs and not state.get("no logs"):
        try:
            await asyncio.wait_for(_sync_logs(state), timeout=_LOGS_WAIT)
        except Exception as e:  # the API server is out of reach: not tried again
            state["no logs"] = True
            _say("the run's logs are Polyaxon's to collect when the run ends: the API server: %r" % e)
        else:  # written as a file of the run's context (plxlogs/), uploaded as the outputs are
            await _upload(fs, fw)


async def _sync_logs(state):
    if "pod" not in state:
        from polyaxon._k8s.manager.async_manager import AsyncK8sManager
        from polyaxon.settings import CLIENT_CONFIG

        k8s = AsyncK8sManager(namespace=CLIENT_CONFIG.namespace, in_cluster=True)
        await k8s.setup()
        state["k8s"] = k8s
        state["pod"] = await k8s.get_pod(os.environ["POLYAXON_K8S_POD_ID"], reraise=True)
    state["logs"] = await sync_logs(
        run_uuid=_RUN, k8s_manager=state["k8s"], pod=state["pod"], last_time=state.get("logs"), stream=False)


async def _main():
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    if _TERMINATED:
        stop.set()
    owner, project, _ = get_run_info()
    client = RunClient(owner=owner, project=project, run_uuid=_RUN)
    fs = await get_async_fs_from_connection(connection=_CONNECTION)
    if os.path.exists(_paths.CONTEXT_MOUNT_FILE_WATCHER):
        fw = FSWatcher.read(_paths.CONTEXT_MOUNT_FILE_WATCHER)
    else:
        fw = FSWatcher()
    state = {}
    made = asyncio.get_running_loop().time()
    while True:
        try:
            await asyncio.wait_for(stop.wait(), timeout=_EVERY)
        except asyncio.TimeoutError:
            pass
        # Stopped before this pass began, it is the last: a SIGTERM during a pass gets one more,
        # which sees what the run wrote while the first one walked its files.
        last = stop.is_set()
        if asyncio.get_running_loop().time() - made > _REFRESH:
            await close_fs(fs)
            fs = await get_async_fs_from_connection(connection=_CONNECTION)
            made = asyncio.get_running_loop().time()
        await _sync(fs, fw, client, state)
        if last:
            break
    _say("stopped, after a last upload")
    await close_fs(fs)
    if "k8s" in state:
        await state["k8s"].close()


asyncio.run(_main())
