{{/*
Connection settings the Polyaxon images read from the environment.
*/}}

{{/* Where the platform's database runs: statefulset or cloudnativepg (the chart's, in the
cluster), or external (postgresql.enabled=false). */}}
{{- define "polyaxon.postgresql.mode" -}}
{{- if .Values.postgresql.enabled }}{{ .Values.postgresql.mode | default "statefulset" }}{{ else }}external{{ end -}}
{{- end -}}

{{/* The CloudNativePG Cluster's name; the operator names its Services, pods and Secrets after it. */}}
{{- define "polyaxon.postgresql.clusterName" -}}
{{- include "polyaxon.componentName" (dict "ctx" . "component" "postgresql") -}}
{{- end -}}

{{- define "polyaxon.postgresql.host" -}}
{{- $mode := include "polyaxon.postgresql.mode" . -}}
{{- if eq $mode "cloudnativepg" -}}
{{- /* The operator's read-write Service follows the primary through a failover. */ -}}
{{- include "polyaxon.postgresql.clusterName" . }}-rw
{{- else if eq $mode "statefulset" -}}
{{- include "polyaxon.componentName" (dict "ctx" . "component" "postgresql") -}}
{{- else -}}
{{- .Values.externalServices.postgresql.host -}}
{{- end -}}
{{- end -}}

{{/* Secret name and key holding the database password. A CloudNativePG Cluster takes its
owner's password from a kubernetes.io/basic-auth Secret (keys username, password). */}}
{{- define "polyaxon.postgresql.secretName" -}}
{{- $mode := include "polyaxon.postgresql.mode" . -}}
{{- if eq $mode "cloudnativepg" -}}
{{- .Values.postgresql.auth.existingSecret | default (printf "%s-auth" (include "polyaxon.postgresql.clusterName" .)) -}}
{{- else if eq $mode "statefulset" -}}
{{- .Values.postgresql.auth.existingSecret | default (include "polyaxon.componentName" (dict "ctx" . "component" "postgresql")) -}}
{{- else -}}
{{- .Values.externalServices.postgresql.existingSecret | default (include "polyaxon.componentName" (dict "ctx" . "component" "postgresql")) -}}
{{- end -}}
{{- end -}}

{{- define "polyaxon.postgresql.secretKey" -}}
{{- $mode := include "polyaxon.postgresql.mode" . -}}
{{- if eq $mode "cloudnativepg" -}}
password
{{- else if and (eq $mode "external") .Values.externalServices.postgresql.existingSecret -}}
{{- .Values.externalServices.postgresql.passwordKey -}}
{{- else -}}
postgres-password
{{- end -}}
{{- end -}}

{{- define "polyaxon.rabbitmq.secretName" -}}
{{- if and .Values.rabbitmq.enabled .Values.rabbitmq.auth.existingSecret -}}
{{- .Values.rabbitmq.auth.existingSecret -}}
{{- else if and (not .Values.rabbitmq.enabled) .Values.externalServices.rabbitmq.existingSecret -}}
{{- .Values.externalServices.rabbitmq.existingSecret -}}
{{- else -}}
{{- include "polyaxon.componentName" (dict "ctx" . "component" "rabbitmq") -}}
{{- end -}}
{{- end -}}

{{- define "polyaxon.rabbitmq.secretKey" -}}
{{- if and (not .Values.rabbitmq.enabled) .Values.externalServices.rabbitmq.existingSecret -}}
{{- .Values.externalServices.rabbitmq.passwordKey -}}
{{- else -}}
rabbitmq-password
{{- end -}}
{{- end -}}

{{- define "polyaxon.redis.secretName" -}}
{{- if and .Values.redis.enabled .Values.redis.auth.existingSecret -}}
{{- .Values.redis.auth.existingSecret -}}
{{- else if and (not .Values.redis.enabled) .Values.externalServices.redis.existingSecret -}}
{{- .Values.externalServices.redis.existingSecret -}}
{{- else -}}
{{- include "polyaxon.componentName" (dict "ctx" . "component" "redis") -}}
{{- end -}}
{{- end -}}

{{- define "polyaxon.redis.secretKey" -}}
{{- if and (not .Values.redis.enabled) .Values.externalServices.redis.existingSecret -}}
{{- .Values.externalServices.redis.passwordKey -}}
{{- else -}}
redis-password
{{- end -}}
{{- end -}}

{{- define "polyaxon.rabbitmq.enabled" -}}
{{- if or .Values.rabbitmq.enabled .Values.externalServices.rabbitmq.host }}true{{ end -}}
{{- end -}}

{{- define "polyaxon.redis.enabled" -}}
{{- if or .Values.redis.enabled .Values.externalServices.redis.host }}true{{ end -}}
{{- end -}}

{{- define "polyaxon.redis.hasPassword" -}}
{{- if or .Values.redis.enabled .Values.externalServices.redis.password .Values.externalServices.redis.existingSecret }}true{{ end -}}
{{- end -}}

{{/* Celery components run only when the chosen broker is available. */}}
{{- define "polyaxon.broker.available" -}}
{{- if eq .Values.broker "rabbitmq" -}}{{ include "polyaxon.rabbitmq.enabled" . }}{{- else if eq .Values.broker "redis" -}}{{ include "polyaxon.redis.enabled" . }}{{- end -}}
{{- end -}}

{{/* Redis as Celery broker: "host:port" of the in-cluster or external Redis. */}}
{{- define "polyaxon.redis.address" -}}
{{- if .Values.redis.enabled -}}
{{- printf "%s:6379" (include "polyaxon.componentName" (dict "ctx" . "component" "redis")) -}}
{{- else -}}
{{- printf "%s:%v" .Values.externalServices.redis.host .Values.externalServices.redis.port -}}
{{- end -}}
{{- end -}}

{{/* Celery runs (and the API hands work to it) only when enabled and its broker is there. */}}
{{- define "polyaxon.celery.enabled" -}}
{{- if and .Values.scheduler.enabled (include "polyaxon.broker.available" .) }}true{{ end -}}
{{- end -}}

{{/*
Addresses of the gateway (API, streams and nginx in one pod). The agent, the operator and the
gateway's own nginx reach the platform through the gateway Service.
*/}}
{{- define "polyaxon.gateway.serviceName" -}}
{{- include "polyaxon.componentName" (dict "ctx" . "component" "gateway") -}}
{{- end -}}

{{- define "polyaxon.gateway.fqdn" -}}
{{- printf "%s.%s.svc.%s" (include "polyaxon.gateway.serviceName" .) .Release.Namespace .Values.dns.clusterDomain -}}
{{- end -}}

{{- define "polyaxon.gateway.scheme" -}}
{{- ternary "https" "http" .Values.ssl.enabled -}}
{{- end -}}

{{/* The gateway Service's URL for users and the platform (the CLI defaults to localhost:8000). */}}
{{- define "polyaxon.gateway.url" -}}
{{- printf "%s://%s:%v" (include "polyaxon.gateway.scheme" .) (include "polyaxon.gateway.fqdn" .) .Values.gateway.service.port -}}
{{- end -}}

{{/* POLYAXON_HOST of the agent, which Polyaxon gives every run: the gateway's runs' port. */}}
{{- define "polyaxon.gateway.runsURL" -}}
{{- printf "%s://%s:%v" (include "polyaxon.gateway.scheme" .) (include "polyaxon.gateway.fqdn" .) .Values.gateway.service.runsPort -}}
{{- end -}}

{{/*
POLYAXON_ALLOWED_HOSTS as a JSON list: the user's hosts plus the gateway Service's in-cluster
names, so the agent, the operator and the probes (which send Host: <fqdn>) are answered.
Empty (allow all) when the user set none.
*/}}
{{- define "polyaxon.allowedHosts" -}}
{{- if .Values.allowedHosts -}}
{{- $svc := include "polyaxon.gateway.serviceName" . -}}
{{- $hosts := concat .Values.allowedHosts (list $svc (printf "%s.%s" $svc .Release.Namespace) (printf "%s.%s.svc" $svc .Release.Namespace) (include "polyaxon.gateway.fqdn" .)) -}}
{{- toJson ($hosts | uniq) -}}
{{- end -}}
{{- end -}}

{{/* The runner's namespaced rights (a Role) mean it must watch its own namespace only. */}}
{{- define "polyaxon.singleNamespace" -}}
{{- ternary "false" "true" .Values.rbac.clusterScoped -}}
{{- end -}}

{{/*
Secret keys the platform processes read, by reference (never inline):
(dict "ctx" $ "keys" (list "POLYAXON_SECRET_KEY" "POLYAXON_SECRET_INTERNAL_TOKEN"))
*/}}
{{- define "polyaxon.env.platformSecret" -}}
{{- range .keys }}
- name: {{ . }}
  valueFrom:
    secretKeyRef:
      name: {{ include "polyaxon.platformSecretName" $.ctx }}
      key: {{ . }}
{{- end }}
{{- end -}}

{{/* Passwords of the database and the broker, for every process that talks to them. */}}
{{- define "polyaxon.env.services" -}}
- name: POLYAXON_DB_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ include "polyaxon.postgresql.secretName" . }}
      key: {{ include "polyaxon.postgresql.secretKey" . }}
{{- if and (include "polyaxon.celery.enabled" .) (eq .Values.broker "rabbitmq") }}
- name: POLYAXON_RABBITMQ_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ include "polyaxon.rabbitmq.secretName" . }}
      key: {{ include "polyaxon.rabbitmq.secretKey" . }}
{{- end }}
{{- if and (include "polyaxon.redis.enabled" .) (include "polyaxon.redis.hasPassword" .) }}
- name: POLYAXON_REDIS_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ include "polyaxon.redis.secretName" . }}
      key: {{ include "polyaxon.redis.secretKey" . }}
{{- end }}
{{- end -}}

{{/*
Environment of the platform processes (gateway, Celery): the platform ConfigMap, the agent
ConfigMap (the API compiles runs with the agent's configuration: without it every run fails
with "Agent configuration not found") and the proxies ConfigMap (the gateway's nginx routes).
*/}}
{{- define "polyaxon.envFrom.platform" -}}
- configMapRef:
    name: {{ include "polyaxon.componentName" (dict "ctx" . "component" "config") }}
- configMapRef:
    name: {{ include "polyaxon.componentName" (dict "ctx" . "component" "proxies") }}
{{- if .Values.agent.enabled }}
- configMapRef:
    name: {{ include "polyaxon.componentName" (dict "ctx" . "component" "agent") }}
{{- end }}
{{- include "polyaxon.artifactsStore.envFrom" . }}
{{- end -}}

{{- define "polyaxon.env.platform" -}}
{{- include "polyaxon.env.services" . }}
{{- include "polyaxon.env.platformSecret" (dict "ctx" . "keys" (list "POLYAXON_SECRET_KEY" "POLYAXON_SECRET_INTERNAL_TOKEN")) }}
{{- end -}}

{{/* Writable scratch space for images run with a read-only or non-root root filesystem. */}}
{{- define "polyaxon.volumeMounts.tmp" -}}
- name: tmp
  mountPath: /tmp
{{- end -}}

{{- define "polyaxon.volumes.tmp" -}}
- name: tmp
  emptyDir: {}
{{- end -}}

{{/*
A digest of every secret input the platform's processes use: a value given in values, or the
name of an existing Secret. A change rolls the pods (checksum/secrets). A Secret changed in the
cluster behind the chart's back is not seen: restart the pods after rotating one.
*/}}
{{- define "polyaxon.secretsChecksum" -}}
{{- $v := .Values -}}
{{- $in := dict "platform" $v.secrets "postgresql" $v.postgresql.auth "rabbitmq" $v.rabbitmq.auth "redis" $v.redis.auth "external" $v.externalServices "store" $v.artifactsStore.secret -}}
{{- toJson $in | sha256sum -}}
{{- end -}}
