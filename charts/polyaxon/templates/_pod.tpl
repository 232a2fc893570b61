{{/*
Pieces every core pod template shares. (dict "ctx" $ "component" "gateway" "values" .Values.gateway)
*/}}

{{/* Pod metadata: labels and annotations (config checksums restart pods on config change). */}}
{{- define "polyaxon.core.podMetadata" -}}
metadata:
  labels:
    {{- include "polyaxon.podLabels" . | nindent 4 }}
  annotations:
    {{- range $name, $path := include "polyaxon.core.configSources" . | fromJson }}
    checksum/{{ $name }}: {{ include "polyaxon.checksum" (dict "ctx" $.ctx "path" $path) }}
    {{- end }}
    checksum/secrets: {{ include "polyaxon.secretsChecksum" .ctx }}
    {{- with .values.podAnnotations }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
{{- end -}}

{{/* The ConfigMaps a component reads its environment from, by checksum name. */}}
{{- define "polyaxon.core.configSources" -}}
{{- if eq .component "agent" -}}
{"agent-config":"/agent/configmap.yaml"}
{{- else if eq .component "operator" -}}
{"operator-config":"/operator/configmap.yaml"}
{{- else if eq .component "migrations" -}}
{"config":"/platform/configmap.yaml"}
{{- else if and (eq .component "gateway") .ctx.Values.agent.enabled -}}
{"config":"/platform/configmap.yaml","proxies-config":"/gateway/configmap.yaml","agent-config":"/agent/configmap.yaml","proxy-config":"/gateway/proxy-configmap.yaml"}
{{- else if eq .component "gateway" -}}
{"config":"/platform/configmap.yaml","proxies-config":"/gateway/configmap.yaml","proxy-config":"/gateway/proxy-configmap.yaml"}
{{- else if .ctx.Values.agent.enabled -}}
{"config":"/platform/configmap.yaml","proxies-config":"/gateway/configmap.yaml","agent-config":"/agent/configmap.yaml"}
{{- else -}}
{"config":"/platform/configmap.yaml","proxies-config":"/gateway/configmap.yaml"}
{{- end -}}
{{- end -}}

{{/* Pod-level spec fields of a core pod: scheduling (category core), security, pull secrets. */}}
{{- define "polyaxon.core.podSpec" -}}
{{- /* Only the processes that call the Kubernetes API (gateway's streams, agent, operator) get a token. */}}
{{- if not (has .component (list "gateway" "agent" "operator")) }}
automountServiceAccountToken: false
{{- end }}
{{- include "polyaxon.imagePullSecrets" .ctx }}
{{- include "polyaxon.securityContext.pod" .ctx }}
{{- include "polyaxon.scheduling" (dict "ctx" .ctx "category" "core" "component" .values "spreadReplicas" .spreadReplicas) }}
{{- end -}}

{{- define "polyaxon.core.container" -}}
image: {{ include "polyaxon.image" (dict "ctx" .ctx "image" .values.image) }}
imagePullPolicy: {{ .ctx.Values.imagePullPolicy }}
{{- include "polyaxon.securityContext.container" (dict "ctx" .ctx "readOnlyRootFilesystem" .readOnlyRootFilesystem) }}
resources:
  {{- toYaml .values.resources | nindent 2 }}
{{- end -}}

{{/*
A container of a pod behind a Service keeps serving for .seconds once its pod is being deleted:
the EndpointSlices, the Ingress controller and the Gateway drop the pod while it still answers,
and only then does the process get SIGTERM (nginx's is a fast stop that cuts what it holds).
Without it, a connection sent to the pod as it stops ends with nothing, in every rolling upgrade.
*/}}
{{- define "polyaxon.drain" -}}
{{- if gt (int .seconds) 0 }}
lifecycle:
  preStop:
    sleep:
      seconds: {{ int .seconds }}
{{- end }}
{{- end -}}

{{/* A PodDisruptionBudget for a core component. */}}
{{- define "polyaxon.core.pdb" -}}
{{- if and .values.enabled .values.pdb.enabled }}
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {{ include "polyaxon.componentName" . }}
  namespace: {{ .ctx.Release.Namespace }}
  labels:
    {{- include "polyaxon.labels" . | nindent 4 }}
spec:
  {{- if not (kindIs "invalid" .values.pdb.minAvailable) }}
  minAvailable: {{ .values.pdb.minAvailable }}
  {{- else }}
  maxUnavailable: {{ .values.pdb.maxUnavailable }}
  {{- end }}
  selector:
    matchLabels:
      {{- include "polyaxon.selectorLabels" . | nindent 6 }}
{{- end }}
{{- end -}}
