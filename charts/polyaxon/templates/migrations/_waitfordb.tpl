{{/*
An init container of the migration Job that waits until the database accepts a connection, with
the API image's Django and the Job's own settings: on a first install the Job starts beside the
PostgreSQL it migrates, and the Job itself has no retries (backoffLimit), so that it migrates
once.
*/}}
{{- define "polyaxon.migrations.waitForDatabaseScript" -}}
import os, time
os.environ.setdefault("POLYAXON_SERVICE", "api")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "haupt.polyconf.settings")
import django
django.setup()
from django.db import connection
while True:
    try:
        connection.ensure_connection()
        print("The database accepts connections.", flush=True)
        break
    except Exception as e:
        print("Waiting for the database: " + str(e).strip(), flush=True)
        connection.close()
        time.sleep(2)
{{- end -}}
