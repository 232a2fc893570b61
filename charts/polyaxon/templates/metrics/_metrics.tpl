{{/*
Metrics (docs/metrics.md): the exporters that run beside the stores, the ports Prometheus
scrapes, and the names of what it scrapes. Polyaxon's own programs export nothing, so the
rules also read kube-state-metrics and the kubelet.
*/}}

{{/* The components that serve a `metrics` port, with that port (JSON {component: port}). */}}
{{- define "polyaxon.metrics.ports" -}}
{{- $ports := dict -}}
{{- if .Values.metrics.enabled -}}
{{- if eq (include "polyaxon.postgresql.mode" .) "statefulset" }}{{ $_ := set $ports "postgresql" 9187 }}{{ end -}}
{{- if .Values.redis.enabled }}{{ $_ := set $ports "redis" 9121 }}{{ end -}}
{{- if .Values.operator.enabled }}{{ $_ := set $ports "operator" 8080 }}{{ end -}}
{{- if .Values.metrics.installer.enabled }}{{ $_ := set $ports "installer-exporter" 9150 }}{{ end -}}
{{- end -}}
{{- toJson $ports -}}
{{- end -}}

{{/* The Service (and Prometheus job) name of a component's metrics: (dict "ctx" $ "component" "postgresql") */}}
{{- define "polyaxon.metrics.serviceName" -}}
{{- include "polyaxon.componentName" (dict "ctx" .ctx "component" (printf "%s-metrics" .component)) -}}
{{- end -}}

{{/* postgres_exporter beside Postgres: it logs in as the chart's user over the pod's loopback.
No probe: an exporter that stalls must never take the store out of its Service. */}}
{{- define "polyaxon.metrics.postgresqlContainer" -}}
{{- if .Values.metrics.enabled }}
{{- $i := .Values.metrics.postgresql.image }}
- name: metrics
  image: {{ include "polyaxon.image" (dict "ctx" . "image" (dict "registry" ($i.registry | default .Values.imageRegistry | default "quay.io") "repository" $i.repository "tag" $i.tag)) }}
  imagePullPolicy: {{ .Values.imagePullPolicy }}
  {{- include "polyaxon.securityContext.container" (dict "ctx" . "readOnlyRootFilesystem" true) | nindent 2 }}
  args:
    - --web.listen-address=:9187
    {{- /* Its start time, for an alert on restarts. */}}
    - --collector.postmaster
  env:
    - name: DATA_SOURCE_URI
      value: {{ printf "127.0.0.1:5432/%s?sslmode=disable" .Values.postgresql.auth.database | quote }}
    - name: DATA_SOURCE_USER
      value: {{ .Values.postgresql.auth.username | quote }}
    - name: DATA_SOURCE_PASS
      valueFrom:
        secretKeyRef:
          name: {{ include "polyaxon.postgresql.secretName" . }}
          key: postgres-password
  ports:
    - name: metrics
      containerPort: 9187
      protocol: TCP
  resources:
    {{- toYaml .Values.metrics.postgresql.resources | nindent 4 }}
{{- end }}
{{- end -}}

{{/* redis_exporter beside Redis, with the password Redis requires. */}}
{{- define "polyaxon.metrics.redisContainer" -}}
{{- if .Values.metrics.enabled }}
- name: metrics
  image: {{ include "polyaxon.image" (dict "ctx" . "image" .Values.metrics.redis.image) }}
  imagePullPolicy: {{ .Values.imagePullPolicy }}
  {{- include "polyaxon.securityContext.container" (dict "ctx" . "readOnlyRootFilesystem" true) | nindent 2 }}
  env:
    - name: REDIS_ADDR
      value: redis://127.0.0.1:6379
    - name: REDIS_EXPORTER_WEB_LISTEN_ADDRESS
      value: ":9121"
    - name: REDIS_PASSWORD
      valueFrom:
        secretKeyRef:
          name: {{ include "polyaxon.redis.secretName" . }}
          key: redis-password
  ports:
    - name: metrics
      containerPort: 9121
      protocol: TCP
  resources:
    {{- toYaml .Values.metrics.redis.resources | nindent 4 }}
{{- end }}
{{- end -}}
