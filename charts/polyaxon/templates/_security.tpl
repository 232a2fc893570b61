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

{{- define "polyaxon.securityContext.pod" -}}
{{- if .Values.securityContext.enabled }}
securityContext:
  runAsNonRoot: true
  runAsUser: {{ include "polyaxon.securityContext.user" . }}
  runAsGroup: {{ include "polyaxon.securityContext.group" . }}
  fsGroup: {{ .Values.securityContext.fsGroup | int64 }}
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
