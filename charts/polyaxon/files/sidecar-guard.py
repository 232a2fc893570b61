
# Polyaxon's sidecar, kept to its own run (after store-guard.py, in the same program). The
# sidecar holds the artifacts bucket's keys and uploads what the run's own container leaves
# under the artifacts context, which that container may fill as it likes:
# - a link there (outputs/environ -> /proc/self/environ) was followed, and the sidecar's own
#   environment, keys included, uploaded as the run's output: store-guard refuses every link
#   under the context, and leaves links out of its listings;
# - what the run writes under _related_runs/<uuid>/, or names in a forged file-watcher state,
#   was uploaded to or deleted from <bucket>/<uuid>/, another run's folder: every write and
#   delete the sidecar sends must fall in this run's own folder.
# The mutating admission policy of the runs (runs/mutatingadmissionpolicy.yaml) makes this the
# sidecar's command: `python -c <this> <Polyaxon's sidecar arguments>`.
import re
import sys

_CONTEXT = os.path.join(os.environ.get("POLYAXON_CONTEXT_ROOT") or "/plx-context", "artifacts")
_RUN = (os.environ.get("POLYAXON_RUN_INSTANCE") or "").rsplit(".", 1)[-1]
if not re.fullmatch(r"[0-9a-f]{32}", _RUN):
    sys.exit("sidecar guard: POLYAXON_RUN_INSTANCE names no run: %r" % os.environ.get("POLYAXON_RUN_INSTANCE"))
install(_CONTEXT)


import polyaxon._fs.async_manager as _manager  # noqa: E402
from polyaxon._fs.fs import get_artifacts_connection  # noqa: E402

# Where the sidecar sends the run's files: <the store's path>/<run uuid>/...
_FOLDER = get_artifacts_connection().store_path.rstrip("/") + "/" + _RUN


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
sys.argv = ["polyaxon", "sidecar"] + sys.argv[1:]
from polyaxon.cli import cli  # noqa: E402

sys.exit(cli())
