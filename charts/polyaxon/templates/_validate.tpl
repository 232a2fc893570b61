{{/*
Render-time checks with errors that name the value and the fix. Called from the platform
ConfigMap, which every render produces.
*/}}
{{- define "polyaxon.validate" -}}
{{- $_ := include "polyaxon.scheduling.nodeSelectors" . -}}
{{- if and (not .Values.postgresql.enabled) (not .Values.externalServices.postgresql.host) -}}
{{- fail "values: postgresql.enabled is false and externalServices.postgresql.host is empty: the platform needs a database; set postgresql.enabled=true or externalServices.postgresql.host" -}}
{{- end -}}
{{- if and .Values.postgresql.enabled .Values.externalServices.postgresql.host -}}
{{- fail "values: both postgresql.enabled and externalServices.postgresql.host are set: choose one (set postgresql.enabled=false to use the external database)" -}}
{{- end -}}
{{- range $c := list "scheduler" "worker" "beat" -}}
{{- if and (index $.Values $c).enabled (not (include "polyaxon.broker.available" $)) -}}
{{- fail (printf "values: %s.enabled needs the broker %q, which is not available: set %s.enabled=true or externalServices.%s.host" $c $.Values.broker $.Values.broker $.Values.broker) -}}
{{- end -}}
{{- end -}}
{{- if and .Values.ssl.enabled (not .Values.ssl.secretName) -}}
{{- fail "values: ssl.enabled is true but ssl.secretName is empty: name a Secret of type kubernetes.io/tls" -}}
{{- end -}}
{{- if and .Values.migrations.renderJob .Values.migrations.useHelmHooks -}}
{{- fail "values: migrations.renderJob is set by polyaxon-deploy only; with migrations.useHelmHooks=true leave it false" -}}
{{- end -}}
{{- end -}}
