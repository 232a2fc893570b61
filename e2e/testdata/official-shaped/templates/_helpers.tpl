{{/* Names and labels as the official chart gives them (facts, written anew). */}}
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
app.kubernetes.io/part-of: "polyaxon-core"
{{- end -}}

{{/* A platform Deployment: (dict "ctx" $ "name" "api" "component" "polyaxon-api" "values" .Values.gateway) */}}
{{- define "official.deployment" -}}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ include "official.fullname" .ctx }}-{{ .name }}
  labels:
    app.kubernetes.io/name: {{ include "official.fullname" .ctx }}-{{ .name }}
    app.kubernetes.io/component: {{ .component | quote }}
    {{- include "official.labels" .ctx | nindent 4 }}
spec:
  replicas: {{ .values.replicas | default 1 }}
  selector:
    matchLabels:
      app.kubernetes.io/name: {{ include "official.fullname" .ctx }}-{{ .name }}
  template:
    metadata:
      labels:
        app.kubernetes.io/name: {{ include "official.fullname" .ctx }}-{{ .name }}
        app.kubernetes.io/component: {{ .component | quote }}
        {{- include "official.labels" .ctx | nindent 8 }}
    spec:
      {{- with .values.nodeSelector }}
      nodeSelector:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      containers:
      - name: polyaxon-{{ .name }}
        image: "{{ .values.image }}:{{ .values.imageTag }}"
        envFrom:
        - secretRef:
            name: {{ include "official.fullname" .ctx }}-secret
        - secretRef:
            name: {{ include "official.fullname" .ctx }}-platform-secret
        env:
        - name: POLYAXON_DB_PASSWORD
          valueFrom:
            secretKeyRef:
              name: {{ include "official.pgFullname" .ctx }}
              key: postgres-password
        - name: POLYAXON_TIME_ZONE
          value: {{ .ctx.Values.timezone | quote }}
{{- end -}}
