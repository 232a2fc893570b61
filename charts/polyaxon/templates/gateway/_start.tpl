{{/*
How the gateway starts Polyaxon's API: without migrating.

haupt's own `server` command (haupt/cli/runners/server.py) calls
haupt.cli.runners.base.start_app with migrate_tables=True and migrate_db=True, so every replica
ran `manage tables` and `manage migrate` before serving, several at once on a fresh database.
Here the container calls that same start_app with both flags off (its defaults, as haupt's
`streams` command does): the same uvicorn application, port handling
(POLYAXON_PROXY_LOCAL_PORT) and worker count (POLYAXON_PROXY_GATEWAY_CONCURRENCY, _PER_CORE)
as `haupt server`, minus the migrations. The migration Job (templates/migrations/job.yaml) is
the one process that migrates. Until the database has no unapplied migration (Django's
`migrate --check`, in-process through the same haupt manage function start_app's migrate()
calls, as `haupt server` did before serving) the gateway waits and does not listen, so no
replica serves an unmigrated schema.

Arguments: HOST PORT [WORKERS].
*/}}
{{- define "polyaxon.gateway.startScript" -}}
import os, sys, time
from clipped.utils.bools import to_bool
os.environ.setdefault("POLYAXON_SERVICE", "api")
host, port = sys.argv[1], int(sys.argv[2])
workers = sys.argv[3] if len(sys.argv) > 3 else os.environ.get("POLYAXON_PROXY_GATEWAY_CONCURRENCY")
from haupt.cli.runners.manage import manage
while True:
    try:
        manage("migrate", ["--check"])
        break
    except SystemExit as e:
        if not e.code:
            break
        why = "unapplied migrations"
    except Exception as e:
        why = (str(e).strip().splitlines() or [type(e).__name__])[-1]
        from django.db import connections
        connections.close_all()
    print("The API waits for the migration Job: " + why, flush=True)
    time.sleep(5)
print("The database is migrated: starting the API (it runs no migrations).", flush=True)
from haupt.cli.runners.base import start_app
start_app(app="haupt.polyconf.asgi.server:application", app_name="api", host=host, port=port, workers=int(workers) if workers else None, per_core=to_bool(os.environ.get("POLYAXON_PROXY_GATEWAY_PER_CORE"), handle_none=True), migrate_tables=False, migrate_db=False)
{{- end -}}
