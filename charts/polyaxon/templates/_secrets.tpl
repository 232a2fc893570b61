{{/*
Secrets are generated once and kept: a value given by the user wins; otherwise the value
already stored in the cluster is reused (lookup); only on first install is one generated.
  (dict "ctx" $ "secret" "<name>" "key" "<key>" "value" <user value> "length" 32)
Returns the base64-encoded value.
*/}}
{{- define "polyaxon.secrets.value" -}}
{{- if .value -}}
{{- .value | toString | b64enc -}}
{{- else -}}
{{- $existing := lookup "v1" "Secret" .ctx.Release.Namespace .secret -}}
{{- $data := dig "data" dict ($existing | default dict) -}}
{{- if hasKey $data .key -}}
{{- index $data .key -}}
{{- else -}}
{{- randAlphaNum (.length | default 32) | b64enc -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* Annotations of generated Secrets: kept on uninstall like the volumes they unlock. */}}
{{- define "polyaxon.secrets.annotations" -}}
helm.sh/resource-policy: keep
{{- end -}}
