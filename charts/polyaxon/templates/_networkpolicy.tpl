{{/*
NetworkPolicy selectors. They match on labels a run pod cannot carry: Polyaxon sets
`app.kubernetes.io/part-of: polyaxon-runs` and its own component on every run pod, over any
label the run asks for (cli `_k8s/converter/base/base.py`), so no run pod is `part-of: polyaxon`.
*/}}

{{/* Every pod of this release (not its runs). */}}
{{- define "polyaxon.networkPolicy.releasePods" -}}
matchLabels:
  app.kubernetes.io/name: {{ include "polyaxon.name" . }}
  app.kubernetes.io/instance: {{ .Release.Name }}
  app.kubernetes.io/part-of: polyaxon
{{- end -}}

{{/* The platform's own processes: the only clients of the dependencies. */}}
{{- define "polyaxon.networkPolicy.platformPods" -}}
matchLabels:
  app.kubernetes.io/name: {{ include "polyaxon.name" . }}
  app.kubernetes.io/instance: {{ .Release.Name }}
  app.kubernetes.io/part-of: polyaxon
matchExpressions:
- key: app.kubernetes.io/component
  operator: In
  values: {{ include "polyaxon.coreComponents" . }}
{{- end -}}
