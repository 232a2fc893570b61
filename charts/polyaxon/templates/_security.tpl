{{/*
Security context, kept apart at pod and container level. With securityContext.enabled every
pod meets the "restricted" Pod Security Standard.
*/}}

{{- define "polyaxon.securityContext.user" -}}
{{- $sc := .Values.securityContext -}}
{{- if hasKey $sc "runAsUser" }}{{ $sc.runAsUser | int64 }}{{ else }}{{ $sc.user | int64 }}{{ end -}}
{{- end -}}

{{- define "polyaxon.securityContext.group" -}}
{{- $sc := .Values.securityContext -}}
{{- if hasKey $sc "runAsGroup" }}{{ $sc.runAsGroup | int64 }}{{ else }}{{ $sc.group | int64 }}{{ end -}}
{{- end -}}

{{/* The platform's ids (JSON {user, group, fsGroup}): its pods' and, by default, the runs'. */}}
{{- define "polyaxon.securityContext.ids" -}}
{{- toJson (dict "user" (include "polyaxon.securityContext.user" . | int64) "group" (include "polyaxon.securityContext.group" . | int64) "fsGroup" (.Values.securityContext.fsGroup | int64)) -}}
{{- end -}}

{{/* The platform's ids as strings (JSON list): what no data store may share. */}}
{{- define "polyaxon.securityContext.taken" -}}
{{- $ids := include "polyaxon.securityContext.ids" . | fromJson -}}
{{- toJson (list (toString ($ids.user | int64)) (toString ($ids.group | int64)) (toString ($ids.fsGroup | int64))) -}}
{{- end -}}

{{- define "polyaxon.securityContext.pod" -}}
{{- include "polyaxon.securityContext.podWithIds" (dict "ctx" . "ids" (include "polyaxon.securityContext.ids" . | fromJson)) }}
{{- end -}}

{{/* (dict "ctx" $ "ids" {user, group, fsGroup}) */}}
{{- define "polyaxon.securityContext.podWithIds" -}}
{{- if .ctx.Values.securityContext.enabled }}
securityContext:
  runAsNonRoot: true
  runAsUser: {{ .ids.user | int64 }}
  runAsGroup: {{ .ids.group | int64 }}
  fsGroup: {{ .ids.fsGroup | int64 }}
  fsGroupChangePolicy: OnRootMismatch
  seccompProfile:
    type: RuntimeDefault
{{- end }}
{{- end -}}

{{/* (dict "ctx" $ "readOnlyRootFilesystem" true) */}}
{{- define "polyaxon.securityContext.container" -}}
{{- if .ctx.Values.securityContext.enabled }}
securityContext:
  allowPrivilegeEscalation: false
  readOnlyRootFilesystem: {{ .readOnlyRootFilesystem | default false }}
  capabilities:
    drop: [ALL]
{{- end }}
{{- end -}}
