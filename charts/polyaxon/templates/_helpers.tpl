{{/*
Names, labels and images shared by every template.
*/}}

{{- define "polyaxon.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* <release>-polyaxon, or the release name alone when it already says polyaxon. */}}
{{- define "polyaxon.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := include "polyaxon.name" . -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* Object name of a component: (dict "ctx" $ "component" "gateway") */}}
{{- define "polyaxon.componentName" -}}
{{- printf "%s-%s" (include "polyaxon.fullname" .ctx) .component | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The Polyaxon version deployed: polyaxon.version, or the chart's appVersion. */}}
{{- define "polyaxon.version" -}}
{{- .Values.polyaxon.version | default .Chart.AppVersion | toString -}}
{{- end -}}

{{- define "polyaxon.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Selector labels: name + instance + component only, since selectors are immutable. */}}
{{- define "polyaxon.selectorLabels" -}}
app.kubernetes.io/name: {{ include "polyaxon.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* Labels of every object: (dict "ctx" $ "component" "gateway") */}}
{{- define "polyaxon.labels" -}}
{{ include "polyaxon.selectorLabels" . }}
app.kubernetes.io/version: {{ include "polyaxon.version" .ctx | quote }}
app.kubernetes.io/managed-by: {{ .ctx.Release.Service }}
app.kubernetes.io/part-of: polyaxon
helm.sh/chart: {{ include "polyaxon.chart" .ctx }}
{{- with .ctx.Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Pod labels: object labels plus the role used by the core co-location affinity. */}}
{{- define "polyaxon.podLabels" -}}
{{ include "polyaxon.labels" . }}
{{- if has .component (include "polyaxon.coreComponents" . | fromJsonArray) }}
polyaxon.com/role: core
{{- end }}
{{- end -}}

{{/* Pod labels of a data store (PostgreSQL, RabbitMQ, Redis): no Polyaxon or chart version,
since a label of the pod template that changes restarts the store's pod; an upgrade of
Polyaxon or of the chart must leave the database serving. */}}
{{- define "polyaxon.dependency.podLabels" -}}
{{ include "polyaxon.selectorLabels" . }}
app.kubernetes.io/managed-by: {{ .ctx.Release.Service }}
app.kubernetes.io/part-of: polyaxon
{{- with .ctx.Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* The core components, from files/components.yaml (the one declaration), as a JSON list. */}}
{{- define "polyaxon.coreComponents" -}}
{{- (.ctx | default .).Files.Get "files/components.yaml" | fromYaml | dig "core" list | toJson -}}
{{- end -}}

{{/* Image reference: (dict "ctx" $ "image" .Values.gateway.image "defaultTag" "x"). */}}
{{- define "polyaxon.image" -}}
{{- $registry := .image.registry | default .ctx.Values.imageRegistry -}}
{{- $tag := .image.tag | default .defaultTag | default (include "polyaxon.version" .ctx) -}}
{{- if $registry -}}
{{- printf "%s/%s:%s" (trimSuffix "/" $registry) .image.repository (toString $tag) -}}
{{- else -}}
{{- printf "%s:%s" .image.repository (toString $tag) -}}
{{- end -}}
{{- end -}}

{{- define "polyaxon.imagePullSecrets" -}}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
{{- range . }}
  - name: {{ . }}
{{- end }}
{{- end }}
{{- end -}}

{{/* Checksum of a ConfigMap's data only, so label bumps do not restart pods. */}}
{{- define "polyaxon.checksum" -}}
{{- pick (include (print .ctx.Template.BasePath .path) .ctx | fromYaml) "data" | toYaml | sha256sum -}}
{{- end -}}

{{- define "polyaxon.platformSecretName" -}}
{{- .Values.secrets.existingSecret | default (printf "%s-platform" (include "polyaxon.fullname" .)) -}}
{{- end -}}

{{- define "polyaxon.serviceAccountName" -}}
{{- include "polyaxon.componentName" . -}}
{{- end -}}

{{/* Postgres major version from the image tag ("16.4-bookworm" -> "16"). */}}
{{- define "polyaxon.postgresql.major" -}}
{{- regexFind "^[0-9]+" (toString .Values.postgresql.image.tag) | default "0" -}}
{{- end -}}

{{/*
Where the data planes of the HTTPRoute's Gateways run (JSON list of namespace label
selectors): httpRoute.dataPlaneNamespaceSelector when set, else each parent Gateway's own
namespace (where Istio, Traefik and NGINX Gateway Fabric run their proxies; Envoy Gateway runs
them in its controller's namespace: name it). Empty without an HTTPRoute.
*/}}
{{- define "polyaxon.httpRoute.dataPlaneSelectors" -}}
{{- $out := list -}}
{{- if .Values.httpRoute.enabled -}}
{{- with .Values.httpRoute.dataPlaneNamespaceSelector -}}
{{- $out = list . -}}
{{- else -}}
{{- range .Values.httpRoute.parentRefs -}}
{{- $out = append $out (dict "kubernetes.io/metadata.name" (.namespace | default $.Release.Namespace)) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- toJson ($out | uniq) -}}
{{- end -}}
