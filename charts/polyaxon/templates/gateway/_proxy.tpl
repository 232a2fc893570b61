{{/*
The gateway pod's reverse proxy: nginx in front of haupt, as Polyaxon's own gateway image runs
it. nginx listens on two ports: gateway.service.targetPort for users (through the edge, an
ingress or a route) and the operator, and gateway.service.runsTargetPort for runs and the
agent, whose POLYAXON_HOST runs inherit. haupt's API and streams listen on the pod's loopback
(gateway.proxy.apiPort, gateway.proxy.streamsPort) and are reached only through nginx.

Where it follows haupt's own generator (`haupt proxy gateway`, haupt/proxies/): the API,
healthz, /internal/ and the web UI go to the API; /streams/ to streams; the timeouts
(POLYAXON_NGINX_TIMEOUT's 650 s); the headers it passes (Host, X-Real-IP, X-Forwarded-For,
Upgrade); X-Accel-Redirect downloads served from the archives folder by an internal location.
Where it differs, and why:
- A request whose path names something in another spelling is refused before any location
  (400): an encoded dot, slash, backslash or percent sign (%2E, %2F, %5C, %25), a NUL, an
  overlong UTF-8 sequence (%C0, %C1, %E0%80, %F0%80: other spellings of `.` and `/`), a raw
  backslash, a dot segment (`/./`, `/../`) or an empty one (`//`). haupt's streams routes take
  the run's uuid as a plain path segment, so `..` there left the artifacts store.
- /auth-request/ and /k8s/ are not served (404, 403). In Polyaxon CE the auth request checks no
  user and answers a /k8s/ exec path with the gateway's own service-account token, which
  /k8s/v1/ then uses to exec into any pod its Role reaches: whoever reaches the gateway would
  get that. Administrators keep `kubectl exec`.
- A streams route of one run (`/streams/v1/{namespace}/{owner}/{project}/runs/{uuid}/...`)
  is served only when the API finds that run in that project: haupt's streams read the store
  by the uuid alone and never look at the project. The multi-run routes (`runs/multi/`) take
  their runs in the query and are not checked.
- Streams reads (GET, HEAD) go to the streams container, which holds no database password,
  secret key or internal token and mounts the store read-only; writes to /streams/ (uploads,
  deletes) go to the API container, which mounts it read-write. Neither follows a link under
  the store (files/store-guard.py).
- Downloads are served with disable_symlinks on, so nginx never follows a link of the archives
  folder out of it.
- Run services (/services/, /external/, /monitors/: notebooks, tensorboards) are not routed:
  haupt's routes take the namespace from the URL and need a resolver; they answer 404.
- The runs' port serves the API and the two agent routes the agent calls (its connections
  check and its data collection, POST), nothing else (403): Polyaxon CE has no per-project
  permissions, so a run could read any project's files through streams under that project's
  URL. With runs.artifactsOfOtherRuns, the streams routes are served there as on the users'
  port. The NetworkPolicies keep runs to this port.
*/}}
{{- define "polyaxon.gateway.proxyConfig" -}}
{{- $p := .Values.gateway.proxy -}}
{{- $timeout := int $p.timeout -}}
# Rendered by the chart (templates/gateway/_proxy.tpl says why each part is there).
daemon off;
worker_processes {{ $p.workers }};
pid /tmp/nginx.pid;
error_log stderr {{ ternary "info" "warn" (eq (upper .Values.logLevel) "DEBUG") }};

events {
    worker_connections 1024;
}

http {
    default_type application/octet-stream;
    access_log /dev/stdout;
    server_tokens off;
    # A read-only root: every file nginx writes goes under /tmp (an emptyDir).
    client_body_temp_path /tmp/nginx-client-body;
    proxy_temp_path /tmp/nginx-proxy;
    fastcgi_temp_path /tmp/nginx-fastcgi;
    uwsgi_temp_path /tmp/nginx-uwsgi;
    scgi_temp_path /tmp/nginx-scgi;
    client_max_body_size {{ $p.maxBodySize }};
    client_header_timeout {{ $timeout }}s;
    send_timeout {{ $timeout }}s;
    keepalive_timeout {{ $timeout }}s;
    proxy_read_timeout {{ $timeout }}s;
    proxy_send_timeout {{ $timeout }}s;
    proxy_http_version 1.1;
    proxy_set_header Host $http_host;
    proxy_set_header X-Real-IP $remote_addr;
    proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
    proxy_set_header X-Forwarded-Proto $scheme;
    proxy_set_header Upgrade $http_upgrade;
    proxy_set_header Connection $polyaxon_connection;
    proxy_redirect off;

    upstream polyaxon_api {
        server 127.0.0.1:{{ $p.apiPort }};
    }
    upstream polyaxon_streams {
        server 127.0.0.1:{{ $p.streamsPort }};
    }

    map $http_upgrade $polyaxon_connection {
        default upgrade;
        "" "";
    }
    # Streams reads go to streams; every write to the API, which may write to the store.
    map $request_method $polyaxon_streams_upstream {
        default polyaxon_api;
        GET polyaxon_streams;
        HEAD polyaxon_streams;
    }
    # The path as the client sent it (up to `?`), judged before nginx decodes it.
    map $request_uri $polyaxon_refused_path {
        default 0;
        "~*^[^?]*%(2e|2f|5c|25|00)" 1;
        "~*^[^?]*%(c0|c1|e0%[89]|f0%[89])" 1;
        "~^[^?]*\\\\" 1;
        "~^[^?]*/\.\.?(/|\?|;|$)" 1;
        "~^[^?]*//" 1;
    }

    # The API's own URL of the run a streams route names ("" for routes of no single run):
    # haupt's streams read a run's files, logs and events by its uuid alone, whatever project
    # the URL names.
    map $request_uri $polyaxon_run_of_project {
        default "";
        "~^/streams/v1/[^/?]+/[^/?]+/[^/?]+/runs/multi(/|\?|$)" "";
        "~^/streams/v1/[^/?]+/(?<polyaxon_owner>[^/?]+)/(?<polyaxon_project>[^/?]+)/runs/(?<polyaxon_run>[^/?]+)" /api/v1/$polyaxon_owner/$polyaxon_project/runs/$polyaxon_run/;
    }

    # Users' port.
    server {
        {{- include "polyaxon.gateway.proxyListen" (dict "ctx" . "port" .Values.gateway.service.targetPort) | nindent 8 }}

        location /auth-request/ {
            return 404;
        }
        location /k8s/ {
            return 403;
        }
        {{- include "polyaxon.gateway.proxyStreams" . | nindent 8 }}
        location / {
            proxy_pass http://polyaxon_api;
        }
    }

    # Runs' port (and the agent's, whose host runs inherit).
    server {
        {{- include "polyaxon.gateway.proxyListen" (dict "ctx" . "port" .Values.gateway.service.runsTargetPort) | nindent 8 }}

        location /api/ {
            proxy_pass http://polyaxon_api;
        }
        location = /healthz/ {
            proxy_pass http://polyaxon_api;
        }
        location ~ ^/streams/v1/[^/?]+/[^/?]+/agents/[^/?]+/connections_check/?$ {
            limit_except POST {
                deny all;
            }
            proxy_pass http://polyaxon_api;
        }
        location ~ ^/internal/v1/[^/?]+/[^/?]+/agents/[^/?]+/collect/?$ {
            limit_except POST {
                deny all;
            }
            proxy_pass http://polyaxon_api;
        }
        {{- if .Values.runs.artifactsOfOtherRuns }}
        {{- include "polyaxon.gateway.proxyStreams" . | nindent 8 }}
        {{- end }}
        location / {
            default_type text/plain;
            return 403 "Runs reach the API only on this port{{ if not .Values.runs.artifactsOfOtherRuns }}: other runs' files are not served to runs (chart value runs.artifactsOfOtherRuns){{ end }}.\n";
        }
    }
}
{{- end -}}

{{/* nginx's listen lines of a gateway port, and its refusal of other spellings of a path. (dict "ctx" $ "port" 8000) */}}
{{- define "polyaxon.gateway.proxyListen" -}}
listen {{ .port }}{{ if .ctx.Values.ssl.enabled }} ssl{{ end }};
{{- if .ctx.Values.ssl.enabled }}
ssl_certificate {{ .ctx.Values.ssl.path }}/tls.crt;
ssl_certificate_key {{ .ctx.Values.ssl.path }}/tls.key;
{{- end }}
if ($polyaxon_refused_path) {
    return 400;
}
{{- end -}}

{{/* nginx's streams locations: a run's routes checked against the URL's project, downloads. */}}
{{- define "polyaxon.gateway.proxyStreams" -}}
location /streams/ {
    auth_request /_polyaxon/run-of-project;
    proxy_pass http://$polyaxon_streams_upstream;
    proxy_buffering off;
}
# A run's route answers only when the run is the URL's project's: the API looks runs
# up by owner, project and uuid (a 404 there is a 403 here, and the route is not read).
location = /_polyaxon/run-of-project {
    internal;
    if ($polyaxon_run_of_project = "") {
        return 204;
    }
    proxy_method GET;
    proxy_pass_request_body off;
    # A proxy_set_header here drops the server's: the API allows the client's Host only.
    proxy_set_header Host $http_host;
    proxy_set_header X-Real-IP $remote_addr;
    proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
    proxy_set_header X-Forwarded-Proto $scheme;
    proxy_set_header Content-Length "";
    proxy_intercept_errors on;
    error_page 404 = @polyaxon_not_the_projects;
    proxy_pass http://polyaxon_api$polyaxon_run_of_project;
}
location @polyaxon_not_the_projects {
    return 403;
}
# haupt's generator keeps /tmp/ internal too; only the archives below are ever served.
location /tmp/ {
    internal;
}
# X-Accel-Redirect of streams' downloads: the copies it makes in its archives folder.
location {{ include "polyaxon.gateway.archivesRoot" . }}/ {
    internal;
    alias {{ include "polyaxon.gateway.archivesRoot" . }}/;
    disable_symlinks on;
}
{{- end -}}

{{/*
An exec probe for a haupt container on the pod's loopback (the kubelet's HTTP probes reach the
pod's address, where haupt does not listen). Arguments: PORT HOST (the Host header Django
allows). (dict "ctx" $ "port" 8001)
*/}}
{{- define "polyaxon.gateway.loopbackProbe" -}}
exec:
  command:
  - python
  - -c
  - {{ "import sys, urllib.request; urllib.request.urlopen(urllib.request.Request('http://127.0.0.1:%s/healthz/' % sys.argv[1], headers={'Host': sys.argv[2]}), timeout=5)" | quote }}
  - {{ .port | quote }}
  - {{ include "polyaxon.gateway.fqdn" .ctx | quote }}
{{- end -}}

{{/*
How a haupt container of the gateway pod starts: the store guard (files/store-guard.py), then
its own program. (dict "ctx" $ "program" SCRIPT)
*/}}
{{- define "polyaxon.gateway.guarded" -}}
{{- printf "%s\n%s" (.ctx.Files.Get "files/store-guard.py") .program -}}
{{- end -}}

{{/* haupt's streams application, without migrations, in one worker (store-guard.py). Arguments: HOST PORT. */}}
{{- define "polyaxon.gateway.streamsStartScript" -}}
import sys
from haupt.cli.runners.base import start_app
start_app(app="haupt.polyconf.asgi.streams:application", app_name="streams", host=sys.argv[1], port=int(sys.argv[2]), workers=1, migrate_tables=False, migrate_db=False)
{{- end -}}

{{/* Where streams copies a file before nginx sends it (POLYAXON_ARCHIVES_ROOT), shared with nginx. */}}
{{- define "polyaxon.gateway.archivesRoot" -}}
/tmp/plx/archives
{{- end -}}

