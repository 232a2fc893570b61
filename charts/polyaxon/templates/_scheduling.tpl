{{/*
Scheduling per category. One helper yields nodeSelector/tolerations/affinity for a pod:
  (dict "ctx" $ "category" "core" "component" .Values.gateway)
Maps: the component's keys win over its category's, key by key (mergeOverwrite onto a deep
copy, so .Values is never mutated). Tolerations: the component's list when non-empty, else
the category's. Dependencies pass no category and use only their own keys. With
"spreadReplicas" true the category's podAffinity is not inherited (the component's own is).
*/}}

{{/* nodeSelectors, or its alias nodeSelector (singular); both at once is an error. */}}
{{- define "polyaxon.scheduling.nodeSelectors" -}}
{{- $plural := .Values.nodeSelectors | default dict -}}
{{- $singular := .Values.nodeSelector -}}
{{- if $singular -}}
{{- $pluralSet := false -}}
{{- range $k, $v := $plural }}{{ if $v }}{{ $pluralSet = true }}{{ end }}{{ end -}}
{{- if $pluralSet -}}
{{- fail "values: both `nodeSelector` and `nodeSelectors` are set; they are the same setting (per-category node labels): keep only `nodeSelectors`" -}}
{{- end -}}
{{- toJson (mergeOverwrite (deepCopy $plural) $singular) -}}
{{- else -}}
{{- toJson $plural -}}
{{- end -}}
{{- end -}}

{{- define "polyaxon.scheduling.resolve" -}}
{{- $nodeSelector := dict -}}
{{- $tolerations := list -}}
{{- $affinity := dict -}}
{{- if .category -}}
{{- $selectors := include "polyaxon.scheduling.nodeSelectors" .ctx | fromJson -}}
{{- $nodeSelector = deepCopy (index $selectors .category | default dict) -}}
{{- $tolerations = index .ctx.Values.tolerations .category | default list -}}
{{- $affinity = deepCopy (index .ctx.Values.affinity .category | default dict) -}}
{{- if .spreadReplicas -}}
{{- /* The category's pod affinity (core co-location) outweighs any preferred anti-affinity
       and would pull every replica of a spread component onto one node. */ -}}
{{- $_ := unset $affinity "podAffinity" -}}
{{- end -}}
{{- end -}}
{{- $c := .component | default dict -}}
{{- $nodeSelector = mergeOverwrite $nodeSelector (deepCopy ($c.nodeSelector | default dict)) -}}
{{- if $c.tolerations -}}{{- $tolerations = $c.tolerations -}}{{- end -}}
{{- $affinity = mergeOverwrite $affinity (deepCopy ($c.affinity | default dict)) -}}
{{- toJson (dict "nodeSelector" $nodeSelector "tolerations" $tolerations "affinity" $affinity) -}}
{{- end -}}

{{/* Pod spec fields; renders nothing for empty parts. */}}
{{- define "polyaxon.scheduling" -}}
{{- $s := include "polyaxon.scheduling.resolve" . | fromJson -}}
{{- with $s.nodeSelector }}
nodeSelector:
{{ toYaml . | indent 2 }}
{{- end }}
{{- with $s.tolerations }}
tolerations:
{{ toYaml . | indent 2 }}
{{- end }}
{{- with $s.affinity }}
affinity:
{{ toYaml . | indent 2 }}
{{- end }}
{{- end -}}

{{/* The run categories' names, from files/run-categories.yaml (the one declaration). */}}
{{- define "polyaxon.runCategories" -}}
{{- $names := list -}}
{{- range (include "polyaxon.runs.categoryFile" . | fromYaml).categories }}{{ $names = append $names .name }}{{ end -}}
{{- toJson $names -}}
{{- end -}}
