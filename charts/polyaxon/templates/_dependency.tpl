{{/*
Pieces the dependency StatefulSets share. (dict "ctx" $ "component" "postgresql" "values" .Values.postgresql)
Dependencies use only their own scheduling keys, never a category's.
*/}}
{{- define "polyaxon.dependency.podSpec" }}
automountServiceAccountToken: false
{{- include "polyaxon.imagePullSecrets" .ctx }}
{{- include "polyaxon.securityContext.pod" .ctx }}
{{- include "polyaxon.scheduling" (dict "ctx" .ctx "component" .values) }}
{{- end -}}

{{/* The data volume claim, kept when the release is uninstalled. */}}
{{- define "polyaxon.dependency.volumeClaim" -}}
{{- if .values.persistence.enabled }}
volumeClaimTemplates:
- apiVersion: v1
  kind: PersistentVolumeClaim
  metadata:
    name: {{ .volumeName | default "data" }}
    labels:
      {{- include "polyaxon.selectorLabels" . | nindent 6 }}
    annotations:
      helm.sh/resource-policy: keep
  spec:
    accessModes:
      {{- toYaml .values.persistence.accessModes | nindent 6 }}
    {{- with .values.persistence.storageClass }}
    storageClassName: {{ . | quote }}
    {{- end }}
    resources:
      requests:
        storage: {{ .values.persistence.size | quote }}
{{- end }}
{{- end -}}

{{- define "polyaxon.dependency.dataVolume" -}}
{{- if not .values.persistence.enabled }}
- name: {{ .volumeName | default "data" }}
  emptyDir: {}
{{- end }}
{{- end -}}

{{/* Headless-free ClusterIP Service of a dependency: (dict ... "port" 5432 "portName" "postgresql") */}}
{{- define "polyaxon.dependency.service" -}}
{{- if .values.enabled }}
apiVersion: v1
kind: Service
metadata:
  name: {{ include "polyaxon.componentName" . }}
  namespace: {{ .ctx.Release.Namespace }}
  labels:
    {{- include "polyaxon.labels" . | nindent 4 }}
spec:
  type: ClusterIP
  selector:
    {{- include "polyaxon.selectorLabels" . | nindent 4 }}
  ports:
  - name: {{ .portName }}
    port: {{ .port }}
    targetPort: {{ .portName }}
    protocol: TCP
{{- end }}
{{- end -}}

{{/*
A dependency accepts traffic only from this release's platform pods. Run pods can never match:
Polyaxon overwrites `app.kubernetes.io/part-of` and `app.kubernetes.io/component` on every
run pod with its own values (polyaxon-runs, polyaxon-jobs, ...), whatever labels a run asks for.
*/}}
{{- define "polyaxon.dependency.networkPolicy" -}}
{{- if and .values.enabled .ctx.Values.networkPolicy.enabled }}
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: {{ include "polyaxon.componentName" . }}
  namespace: {{ .ctx.Release.Namespace }}
  labels:
    {{- include "polyaxon.labels" . | nindent 4 }}
spec:
  podSelector:
    matchLabels:
      {{- include "polyaxon.selectorLabels" . | nindent 6 }}
  policyTypes: [Ingress]
  ingress:
  - from:
    - podSelector:
        {{- include "polyaxon.networkPolicy.platformPods" .ctx | nindent 8 }}
    ports:
    - port: {{ .port }}
      protocol: TCP
{{- end }}
{{- end -}}

{{/* A dependency's password Secret, generated once: (dict ... "key" "postgres-password" "value" <user value>) */}}
{{- define "polyaxon.dependency.secret" -}}
{{- $name := include "polyaxon.componentName" . }}
apiVersion: v1
kind: Secret
metadata:
  name: {{ $name }}
  namespace: {{ .ctx.Release.Namespace }}
  labels:
    {{- include "polyaxon.labels" . | nindent 4 }}
  annotations:
    {{- include "polyaxon.secrets.annotations" . | nindent 4 }}
type: Opaque
data:
  {{ .key }}: {{ include "polyaxon.secrets.value" (dict "ctx" .ctx "secret" $name "key" .key "value" .value "length" 32) }}
  {{- range $k, $v := .extra }}
  {{ $k }}: {{ include "polyaxon.secrets.value" (dict "ctx" $.ctx "secret" $name "key" $k "value" $v "length" 48) }}
  {{- end }}
{{- end -}}
