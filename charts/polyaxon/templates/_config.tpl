{{/*
Connection settings the Polyaxon images read from the environment.
*/}}

{{- define "polyaxon.postgresql.host" -}}
{{- if .Values.postgresql.enabled -}}
{{- include "polyaxon.componentName" (dict "ctx" . "component" "postgresql") -}}
{{- else -}}
{{- .Values.externalServices.postgresql.host -}}
{{- end -}}
{{- end -}}

{{/* Secret name and key holding the database password. */}}
{{- define "polyaxon.postgresql.secretName" -}}
{{- if .Values.postgresql.enabled -}}
{{- .Values.postgresql.auth.existingSecret | default (include "polyaxon.componentName" (dict "ctx" . "component" "postgresql")) -}}
{{- else -}}
{{- .Values.externalServices.postgresql.existingSecret | default (include "polyaxon.componentName" (dict "ctx" . "component" "postgresql")) -}}
{{- end -}}
{{- end -}}

{{- define "polyaxon.postgresql.secretKey" -}}
{{- if and (not .Values.postgresql.enabled) .Values.externalServices.postgresql.existingSecret -}}
{{- .Values.externalServices.postgresql.passwordKey -}}
{{- else -}}
postgres-password
{{- end -}}
{{- end -}}

{{- define "polyaxon.rabbitmq.secretName" -}}
{{- if and (not .Values.rabbitmq.enabled) .Values.externalServices.rabbitmq.existingSecret -}}
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
{{- if and (not .Values.redis.enabled) .Values.externalServices.redis.existingSecret -}}
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

{{/* Environment every platform container gets (secrets by reference, never inline). */}}
{{- define "polyaxon.env.platform" -}}
- name: POLYAXON_DB_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ include "polyaxon.postgresql.secretName" . }}
      key: {{ include "polyaxon.postgresql.secretKey" . }}
{{- if include "polyaxon.rabbitmq.enabled" . }}
- name: POLYAXON_RABBITMQ_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ include "polyaxon.rabbitmq.secretName" . }}
      key: {{ include "polyaxon.rabbitmq.secretKey" . }}
{{- end }}
{{- if include "polyaxon.redis.hasPassword" . }}
- name: POLYAXON_REDIS_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ include "polyaxon.redis.secretName" . }}
      key: {{ include "polyaxon.redis.secretKey" . }}
{{- end }}
{{- end -}}

{{- define "polyaxon.envFrom.platform" -}}
- configMapRef:
    name: {{ include "polyaxon.componentName" (dict "ctx" . "component" "config") }}
- secretRef:
    name: {{ include "polyaxon.platformSecretName" . }}
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
