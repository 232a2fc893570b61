#!/bin/bash
# The entrypoint of the local stand-ins for Polyaxon's images (built by
# e2e/scripts/build-kind-images.sh; the published images' start scripts are not public). What
# each does is what docs/development.md's program table infers; the image's POLYAXON_SERVICE
# chooses. A container that gives its own command (`python -c ...`, `polyaxon initializer ...`,
# `polyaxon sidecar ...`) never reaches this script.
set -euo pipefail

case "${POLYAXON_SERVICE:-}" in
  api)
    # No arguments: haupt's server (it migrates first). Arguments: a management command
    # (`migrate`, `shell -- --command ...`).
    if [ "$#" -eq 0 ]; then
      exec haupt server --host 0.0.0.0 --port "${POLYAXON_API_PORT:-8000}"
    fi
    exec haupt manage -c "$@"
    ;;
  agent)
    # `start` runs the agent; `healthz` is the probe (passes only with
    # POLYAXON_AGENT_ENABLE_HEALTH_CHECKS=true).
    case "${1:-start}" in
      start) shift || true; exec polyaxon agent start "$@" ;;
      healthz) exec polyaxon agent healthz ;;
    esac
    exec polyaxon agent "$@"
    ;;
  scheduler)
    # `scheduler [celery worker options]`: a Celery worker of haupt's scheduler queues.
    if [ "${1:-scheduler}" = scheduler ]; then
      [ "$#" -gt 0 ] && shift
      export DJANGO_SETTINGS_MODULE="${DJANGO_SETTINGS_MODULE:-haupt.polyconf.settings}"
      exec celery --app haupt.background.celeryp.app worker --loglevel INFO \
        --queues "$(haupt queues --service scheduler)" "$@"
    fi
    ;;
esac
if [ "$#" -eq 0 ]; then
  exec polyaxon --help
fi
exec "$@"
