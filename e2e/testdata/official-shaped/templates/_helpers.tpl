{{/* Names, labels and configuration sources as the official chart 2.x gives them (facts, written anew). */}}
{{- define "official.fullname" -}}
{{- printf "%s-polyaxon" .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "official.pgFullname" -}}
{{- printf "%s-postgresql" .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "official.labels" -}}
release: {{ .Release.Name | quote }}
heritage: {{ .Release.Service | quote }}
app.kubernetes.io/instance: {{ printf "%s-%s" .Chart.Name .Chart.Version | quote }}
app.kubernetes.io/version: {{ .Chart.Version | quote }}
app.kubernetes.io/managed-by: "helm"
{{- end -}}

{{/* metadata of a configuration object: (dict "ctx" $ "name" "agent-config") */}}
{{- define "official.configMeta" -}}
name: {{ include "official.fullname" .ctx }}-{{ .name }}
labels:
  app.kubernetes.io/name: {{ include "official.fullname" .ctx }}-{{ .name }}
  {{- include "official.labels" .ctx | nindent 2 }}
  app.kubernetes.io/part-of: "polyaxon-core"
  app.kubernetes.io/component: "polyaxon-config"
{{- end -}}

{{/* The gateway Service's cluster DNS name, which the proxies configuration names. */}}
{{- define "official.gatewayHost" -}}
{{ include "official.fullname" . }}-gateway.{{ .Release.Namespace }}.svc.{{ .Values.dns.customCluster }}
{{- end -}}

{{/* The artifacts store: artifactsStore, else the fallback. */}}
{{- define "official.store" -}}
{{- toJson (default .Values.defaultArtifactsStore .Values.artifactsStore) -}}
{{- end -}}

{{/* One default placement for every run: the global scheduling values. */}}
{{- define "official.runScheduling" -}}
{{- $s := dict -}}
{{- with .Values.nodeSelector }}{{ $_ := set $s "nodeSelector" . }}{{ end -}}
{{- with .Values.tolerations }}{{ $_ := set $s "tolerations" . }}{{ end -}}
{{- with .Values.affinity }}{{ $_ := set $s "affinity" . }}{{ end -}}
{{- toJson $s -}}
{{- end -}}

{{/* envFrom sources: the common Secret and ConfigMap. */}}
{{- define "official.envFrom.common" -}}
- secretRef:
    name: {{ include "official.fullname" . }}-secret
- configMapRef:
    name: {{ include "official.fullname" . }}-config
{{- end -}}

{{- define "official.envFrom.agent" -}}
- configMapRef:
    name: {{ include "official.fullname" . }}-agent-config
{{- end -}}

{{- define "official.envFrom.proxies" -}}
- configMapRef:
    name: {{ include "official.fullname" . }}-proxies-config
{{- end -}}

{{/* The API's own sources: the platform Secret and ConfigMap, and the agent's (it compiles runs). */}}
{{- define "official.envFrom.platform" -}}
- secretRef:
    name: {{ include "official.fullname" . }}-platform-secret
- configMapRef:
    name: {{ include "official.fullname" . }}-platform-config
{{ include "official.envFrom.agent" . }}
{{- end -}}

{{/* The database password: the Bitnami Secret's superuser key. */}}
{{- define "official.env.db" -}}
- name: POLYAXON_DB_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ include "official.pgFullname" . }}
      key: postgres-password
{{- end -}}

{{/* Pod placement of a platform component (its nodeSelector, else the global one). */}}
{{- define "official.scheduling" -}}
{{- with (default .ctx.Values.nodeSelector .values.nodeSelector) }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* A platform Deployment's metadata and selector: (dict "ctx" $ "name" "api" "app" "gateway" "component" "polyaxon-api" "values" .Values.gateway) */}}
{{- define "official.deploymentHead" -}}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ include "official.fullname" .ctx }}-{{ .name }}
  labels:
    app.kubernetes.io/name: {{ include "official.fullname" .ctx }}-{{ .app }}
    {{- include "official.labels" .ctx | nindent 4 }}
    app.kubernetes.io/part-of: "polyaxon-core"
    app.kubernetes.io/component: {{ .component | quote }}
spec:
  replicas: {{ .values.replicas | default 1 }}
  selector:
    matchLabels:
      app.kubernetes.io/name: {{ include "official.fullname" .ctx }}-{{ .app }}
  template:
    metadata:
      labels:
        app.kubernetes.io/name: {{ include "official.fullname" .ctx }}-{{ .app }}
        {{- include "official.labels" .ctx | nindent 8 }}
        app.kubernetes.io/part-of: "polyaxon-core"
        app.kubernetes.io/component: {{ .component | quote }}
{{- end -}}
