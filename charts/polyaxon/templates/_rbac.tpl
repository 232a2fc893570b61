{{/*
RBAC of the processes that talk to the Kubernetes API: the agent (creates runs), the operator
(reconciles them), the gateway (streams reads run pods and logs) and run pods themselves.
The rules are those of Polyaxon's own chart (polyaxon/charts 2.15.1, `agent-sa.yaml`,
`operator-sa.yaml`, `runs-sa.yaml`), no more; charts/testdata/rbac-upstream.yaml lists them
with their source. Every one of these rights is about runs, so each Role is in the runs
namespace (runs.namespace), and none in the platform's when runs have their own: the agent,
the operator and the gateway can then read no Secret of the platform through Kubernetes. With
rbac.clusterScoped the rules become a ClusterRole, except Secrets and pods/exec, which stay in
a Role of the runs namespace.
*/}}

{{- define "polyaxon.rbac.rules.agent" -}}
- apiGroups: [""]
  resources: [pods]
  verbs: [get, watch, list, create, delete, deletecollection, patch]
- apiGroups: [batch]
  resources: [jobs]
  verbs: [get, watch, list, create, delete, patch]
- apiGroups: [""]
  resources: [configmaps, secrets]
  verbs: [get, update, patch, create, delete]
- apiGroups: [""]
  resources: [services]
  verbs: [get, create, patch, delete, list]
- apiGroups: [apps]
  resources: [deployments]
  verbs: [get, create, patch, delete, list]
- apiGroups: [metrics.k8s.io]
  resources: [pods, nodes]
  verbs: [get, list, watch]
- apiGroups: [""]
  resources: [events, pods/status, pods/log]
  verbs: [watch, get, list]
- apiGroups: [""]
  resources: [pods/exec]
  verbs: [get, create]
- apiGroups: [polyaxon.com]
  resources: [clusters, jobs, kfjobs, services]
  verbs: [get, watch, list, create, delete, patch]
{{- end -}}

{{/* The Kubeflow and cluster kinds the operator reconciles, only those switched on. */}}
{{- define "polyaxon.rbac.operatorKinds" -}}
{{- $kinds := list -}}
{{- if .Values.operators.tfjob }}{{ $kinds = append $kinds (list "kubeflow.org" "tfjobs") }}{{ end -}}
{{- if .Values.operators.pytorchjob }}{{ $kinds = append $kinds (list "kubeflow.org" "pytorchjobs") }}{{ end -}}
{{- if .Values.operators.mpijob }}{{ $kinds = append $kinds (list "kubeflow.org" "mpijobs") }}{{ end -}}
{{- if .Values.operators.raycluster }}{{ $kinds = append $kinds (list "ray.io" "rayclusters") }}{{ end -}}
{{- if .Values.operators.daskcluster }}{{ $kinds = append $kinds (list "kubernetes.dask.org" "daskclusters") }}{{ end -}}
{{- toJson $kinds -}}
{{- end -}}

{{- define "polyaxon.rbac.rules.operator" -}}
- apiGroups: [""]
  resources: [events]
  verbs: [get, list, watch]
- apiGroups: [""]
  resources: [pods, services]
  verbs: [create, delete, get, list, patch, update, watch]
- apiGroups: [""]
  resources: [pods/status, services/status]
  verbs: [get, patch, update]
- apiGroups: [apps]
  resources: [deployments]
  verbs: [create, delete, get, list, patch, update, watch]
- apiGroups: [apps]
  resources: [deployments/status]
  verbs: [get, patch, update]
- apiGroups: [batch]
  resources: [jobs]
  verbs: [create, delete, get, list, patch, update, watch]
- apiGroups: [batch]
  resources: [jobs/status]
  verbs: [get, patch, update]
- apiGroups: [polyaxon.com]
  resources: [clusters, jobs, kfjobs, services]
  verbs: [create, delete, get, list, patch, update, watch]
- apiGroups: [polyaxon.com]
  resources: [clusters/finalizers, jobs/finalizers, kfjobs/finalizers, services/finalizers]
  verbs: [update]
- apiGroups: [polyaxon.com]
  resources: [clusters/status, jobs/status, kfjobs/status, services/status]
  verbs: [get, patch, update]
{{- range $k := include "polyaxon.rbac.operatorKinds" . | fromJsonArray }}
- apiGroups: [{{ index $k 0 }}]
  resources: [{{ index $k 1 }}]
  verbs: [create, delete, get, list, patch, update, watch]
- apiGroups: [{{ index $k 0 }}]
  resources: [{{ index $k 1 }}/status]
  verbs: [get, patch, update]
{{- end }}
{{- end -}}

{{/*
Streams (in the gateway pod) shows run pods, their events and live logs. No pods/exec: the
gateway's nginx refuses /k8s/ (gateway/_proxy.tpl), whose exec proxy used this pod's token for
anyone who reached the gateway; `kubectl exec` is the administrators' way into a run.
*/}}
{{- define "polyaxon.rbac.rules.gateway" -}}
- apiGroups: [""]
  resources: [pods, pods/log, pods/status, events]
  verbs: [get, list, watch]
- apiGroups: [polyaxon.com]
  resources: [clusters, jobs, kfjobs, services]
  verbs: [get, list, watch]
{{- end -}}

{{/*
What a run's sidecar reads with the runs account (cli `_sidecar/container`, `_k8s/logging`):
its own pod, status and logs, and the pods, events and services it monitors. Upstream also
gives runs metrics and Polyaxon's objects, which no run process reads: left out.
*/}}
{{- define "polyaxon.rbac.rules.runs" -}}
- apiGroups: [""]
  resources: [pods, services, events, pods/status, pods/log]
  verbs: [get, watch, list]
{{- end -}}

{{/* Resources that never leave the release namespace, even with rbac.clusterScoped. */}}
{{- define "polyaxon.rbac.namespacedOnly" -}}
["secrets","pods/exec"]
{{- end -}}

{{/*
Whether a component's RBAC is rendered: (dict "ctx" $ "component" "agent").
The runner's rights follow rbac.create; the gateway and runs service accounts exist whenever
their pods do.
*/}}
{{- define "polyaxon.rbac.enabled" -}}
{{- $v := .ctx.Values -}}
{{- if eq .component "gateway" -}}true
{{- else if eq .component "runs" -}}{{ if and $v.agent.enabled $v.runs.serviceAccount.create }}true{{ end }}
{{- else if and $v.rbac.create (index $v .component).enabled -}}true
{{- end -}}
{{- end -}}

{{/* Split a rule list: (dict "rules" <list> "namespacedOnly" true|false) -> JSON list. */}}
{{- define "polyaxon.rbac.split" -}}
{{- $only := include "polyaxon.rbac.namespacedOnly" . | fromJsonArray -}}
{{- $out := list -}}
{{- range $r := .rules -}}
{{- $keep := list -}}
{{- range $res := $r.resources -}}
{{- if eq (has $res $only) $.namespacedOnly }}{{ $keep = append $keep $res }}{{ end -}}
{{- end -}}
{{- if $keep }}{{ $out = append $out (dict "apiGroups" $r.apiGroups "resources" $keep "verbs" $r.verbs) }}{{ end -}}
{{- end -}}
{{- toJson $out -}}
{{- end -}}

{{- define "polyaxon.rbac.clusterScoped" -}}
{{- if and .ctx.Values.rbac.clusterScoped (has .component (list "agent" "operator")) }}true{{ end -}}
{{- end -}}

{{- define "polyaxon.rbac.clusterRoleName" -}}
{{- printf "%s-%s" .ctx.Release.Namespace (include "polyaxon.componentName" .) -}}
{{- end -}}

{{/*
The Role (and, cluster-scoped, the ClusterRole) of a component:
(dict "ctx" $ "component" "agent" "rules" (include "polyaxon.rbac.rules.agent" $))
*/}}
{{- define "polyaxon.rbac.role" -}}
{{- if include "polyaxon.rbac.enabled" . }}
{{- $rules := .rules | fromYamlArray }}
{{- $namespaced := $rules }}
{{- if include "polyaxon.rbac.clusterScoped" . }}
{{- $namespaced = include "polyaxon.rbac.split" (dict "rules" $rules "namespacedOnly" true) | fromJsonArray }}
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: {{ include "polyaxon.rbac.clusterRoleName" . }}
  labels:
    {{- include "polyaxon.labels" . | nindent 4 }}
rules:
  {{- include "polyaxon.rbac.split" (dict "rules" $rules "namespacedOnly" false) | fromJsonArray | toYaml | nindent 2 }}
{{- end }}
{{- if $namespaced }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: {{ include "polyaxon.componentName" . }}
  namespace: {{ include "polyaxon.runs.namespace" .ctx }}
  labels:
    {{- include "polyaxon.labels" . | nindent 4 }}
rules:
  {{- toYaml $namespaced | nindent 2 }}
{{- end }}
{{- end }}
{{- end -}}

{{- define "polyaxon.rbac.binding" -}}
{{- if include "polyaxon.rbac.enabled" . }}
{{- $subject := dict "kind" "ServiceAccount" "name" (include "polyaxon.serviceAccountName" .) "namespace" (include "polyaxon.serviceAccountNamespace" .) }}
{{- $rules := .rules | fromYamlArray }}
{{- $namespaced := $rules }}
{{- if include "polyaxon.rbac.clusterScoped" . }}
{{- $namespaced = include "polyaxon.rbac.split" (dict "rules" $rules "namespacedOnly" true) | fromJsonArray }}
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: {{ include "polyaxon.rbac.clusterRoleName" . }}
  labels:
    {{- include "polyaxon.labels" . | nindent 4 }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: {{ include "polyaxon.rbac.clusterRoleName" . }}
subjects:
  - {{ toJson $subject }}
{{- end }}
{{- if $namespaced }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: {{ include "polyaxon.componentName" . }}
  namespace: {{ include "polyaxon.runs.namespace" .ctx }}
  labels:
    {{- include "polyaxon.labels" . | nindent 4 }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: {{ include "polyaxon.componentName" . }}
subjects:
  - {{ toJson $subject }}
{{- end }}
{{- end }}
{{- end -}}

{{/* Where a component's ServiceAccount lives: the runs one with the runs, the others with the platform. */}}
{{- define "polyaxon.serviceAccountNamespace" -}}
{{- if eq .component "runs" }}{{ include "polyaxon.runs.namespace" .ctx }}{{ else }}{{ .ctx.Release.Namespace }}{{ end -}}
{{- end -}}

{{/* Whether a component's ServiceAccount exists: whenever its pods do. */}}
{{- define "polyaxon.serviceAccount.enabled" -}}
{{- $v := .ctx.Values -}}
{{- if eq .component "gateway" -}}true
{{- else if eq .component "runs" -}}{{ if and $v.agent.enabled $v.runs.serviceAccount.create }}true{{ end }}
{{- else if (index $v .component).enabled -}}true
{{- end -}}
{{- end -}}

{{/*
A component's ServiceAccount: only the processes that call the Kubernetes API have one (agent,
operator, the gateway's streams, runs); every other pod runs without a token.
*/}}
{{- define "polyaxon.rbac.serviceAccount" -}}
{{- if include "polyaxon.serviceAccount.enabled" . }}
apiVersion: v1
kind: ServiceAccount
metadata:
  name: {{ include "polyaxon.serviceAccountName" . }}
  namespace: {{ include "polyaxon.serviceAccountNamespace" . }}
  labels:
    {{- include "polyaxon.labels" . | nindent 4 }}
  {{- with (index .ctx.Values .component).serviceAccount }}{{ with .annotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}{{ end }}
{{- /* Polyaxon gives run pods no pull secret of its own: the service account's reach them all. */}}
{{- if and (eq .component "runs") .ctx.Values.imagePullSecrets }}
imagePullSecrets:
{{- range .ctx.Values.imagePullSecrets }}
  - name: {{ . }}
{{- end }}
{{- end }}
{{- end }}
{{- end -}}
