{{/*
RBAC of the workload runner: namespaced (Role) by default, cluster-wide (ClusterRole) when
rbac.clusterScoped. (dict "ctx" $ "component" "agent")
*/}}
{{- define "polyaxon.rbac.rules.agent" -}}
- apiGroups: [""]
  resources: [pods, pods/log, pods/exec, services, configmaps, secrets, events, persistentvolumeclaims]
  verbs: [get, list, watch, create, update, patch, delete]
- apiGroups: [apps]
  resources: [deployments]
  verbs: [get, list, watch, create, update, patch, delete]
- apiGroups: [batch]
  resources: [jobs]
  verbs: [get, list, watch, create, update, patch, delete]
- apiGroups: [polyaxon.com]
  resources: [jobs, services, clusters, kfjobs]
  verbs: [get, list, watch, create, update, patch, delete]
{{- end -}}

{{- define "polyaxon.rbac.rules.operator" -}}
- apiGroups: [""]
  resources: [pods, services, configmaps, events]
  verbs: [get, list, watch, create, update, patch, delete]
- apiGroups: [apps]
  resources: [deployments]
  verbs: [get, list, watch, create, update, patch, delete]
- apiGroups: [batch]
  resources: [jobs]
  verbs: [get, list, watch, create, update, patch, delete]
- apiGroups: [polyaxon.com]
  resources: [jobs, services, clusters, kfjobs, jobs/status, services/status, clusters/status, kfjobs/status]
  verbs: [get, list, watch, create, update, patch, delete]
- apiGroups: [kubeflow.org]
  resources: [tfjobs, pytorchjobs, mpijobs]
  verbs: [get, list, watch, create, update, patch, delete]
- apiGroups: [coordination.k8s.io]
  resources: [leases]
  verbs: [get, list, watch, create, update, patch, delete]
{{- end -}}

{{- define "polyaxon.rbac.role" -}}
{{- if and .ctx.Values.rbac.create (index .ctx.Values .component).enabled }}
apiVersion: rbac.authorization.k8s.io/v1
kind: {{ ternary "ClusterRole" "Role" .ctx.Values.rbac.clusterScoped }}
metadata:
  {{- if .ctx.Values.rbac.clusterScoped }}
  name: {{ printf "%s-%s" .ctx.Release.Namespace (include "polyaxon.componentName" .) }}
  {{- else }}
  name: {{ include "polyaxon.componentName" . }}
  namespace: {{ .ctx.Release.Namespace }}
  {{- end }}
  labels:
    {{- include "polyaxon.labels" . | nindent 4 }}
rules:
  {{- include (printf "polyaxon.rbac.rules.%s" .component) . | nindent 2 }}
{{- end }}
{{- end -}}

{{- define "polyaxon.rbac.binding" -}}
{{- if and .ctx.Values.rbac.create (index .ctx.Values .component).enabled }}
{{- $kind := ternary "ClusterRole" "Role" .ctx.Values.rbac.clusterScoped }}
apiVersion: rbac.authorization.k8s.io/v1
kind: {{ $kind }}Binding
metadata:
  {{- if .ctx.Values.rbac.clusterScoped }}
  name: {{ printf "%s-%s" .ctx.Release.Namespace (include "polyaxon.componentName" .) }}
  {{- else }}
  name: {{ include "polyaxon.componentName" . }}
  namespace: {{ .ctx.Release.Namespace }}
  {{- end }}
  labels:
    {{- include "polyaxon.labels" . | nindent 4 }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: {{ $kind }}
  name: {{ ternary (printf "%s-%s" .ctx.Release.Namespace (include "polyaxon.componentName" .)) (include "polyaxon.componentName" .) .ctx.Values.rbac.clusterScoped }}
subjects:
- kind: ServiceAccount
  name: {{ include "polyaxon.serviceAccountName" . }}
  namespace: {{ .ctx.Release.Namespace }}
{{- end }}
{{- end -}}

{{- define "polyaxon.rbac.serviceAccount" -}}
{{- if (index .ctx.Values .component).enabled }}
apiVersion: v1
kind: ServiceAccount
metadata:
  name: {{ include "polyaxon.serviceAccountName" . }}
  namespace: {{ .ctx.Release.Namespace }}
  labels:
    {{- include "polyaxon.labels" . | nindent 4 }}
{{- end }}
{{- end -}}
