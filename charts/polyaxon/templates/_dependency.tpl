{{/*
Pieces the dependency StatefulSets share. (dict "ctx" $ "component" "postgresql" "values" .Values.postgresql)
Dependencies use only their own scheduling keys, never a category's.
*/}}
{{- define "polyaxon.dependency.podSpec" }}
automountServiceAccountToken: false
{{- include "polyaxon.imagePullSecrets" .ctx }}
{{- include "polyaxon.securityContext.podWithIds" (dict "ctx" .ctx "ids" (include "polyaxon.dependency.ids" . | fromJson)) }}
{{- include "polyaxon.scheduling" (dict "ctx" .ctx "component" .values) }}
{{- end -}}

{{/* The name of a dependency's data claim template: Postgres's carries its major version, so
that a new major never opens the old data. (dict "ctx" $ "component" "postgresql") */}}
{{- define "polyaxon.dependency.volumeName" -}}
{{- if eq .component "postgresql" }}data-pg{{ include "polyaxon.postgresql.major" .ctx }}{{ else }}data{{ end -}}
{{- end -}}

{{/*
The data stores the release runs, with their ids (JSON [{name, user, group, fsGroup, kept}]):
what run pods may never run as (the runs' restrictions) and what the NOTES report.
*/}}
{{- define "polyaxon.dataStores" -}}
{{- $out := list -}}
{{- range $name := list "postgresql" "rabbitmq" "redis" -}}
{{- $v := index $.Values $name -}}
{{- if $v.enabled -}}
{{- $c := dict "ctx" $ "component" $name "values" $v "volumeName" (include "polyaxon.dependency.volumeName" (dict "ctx" $ "component" $name)) -}}
{{- $ids := include "polyaxon.dependency.ids" $c | fromJson -}}
{{- if and (eq $name "postgresql") (eq (include "polyaxon.postgresql.mode" $) "cloudnativepg") -}}
{{- /* CloudNativePG runs Postgres as the image's own postgres user. */ -}}
{{- $cnpg := $v.cloudnativepg -}}
{{- $ids = dict "user" ($cnpg.postgresUID | int64) "group" ($cnpg.postgresGID | int64) "fsGroup" ($cnpg.postgresGID | int64) -}}
{{- end -}}
{{- $out = append $out (merge (dict "name" $name) $ids) -}}
{{- end -}}
{{- end -}}
{{- toJson $out -}}
{{- end -}}

{{/* What the dependency's StatefulSet in the cluster keeps, when it keeps the same claim (its
data): JSON {securityContext (its pods'), accessModes (its claim's)}; empty otherwise. */}}
{{- define "polyaxon.dependency.live" -}}
{{- $live := dict -}}
{{- if .values.persistence.enabled -}}
{{- $sts := lookup "apps/v1" "StatefulSet" .ctx.Release.Namespace (include "polyaxon.componentName" .) | default dict -}}
{{- range (dig "spec" "volumeClaimTemplates" list $sts) -}}
{{- if eq (dig "metadata" "name" "" .) ($.volumeName | default "data") -}}
{{- $live = dict "securityContext" (dig "spec" "template" "spec" "securityContext" dict $sts) "accessModes" (dig "spec" "accessModes" list .) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- toJson $live -}}
{{- end -}}

{{/*
The ids a dependency runs with (JSON {user, group, fsGroup}): <component>.securityContext, apart
from the runs' (securityContext.*), so that a run pod, by default, owns none of its files. A
StatefulSet that already runs keeps the ids its data was written with (Postgres will not start
on a data directory another user owns, and a non-root pod cannot change owners): the NOTES say so.
*/}}
{{- define "polyaxon.dependency.ids" -}}
{{- $sc := .values.securityContext -}}
{{- $ids := dict "user" ($sc.user | int64) "group" ($sc.group | int64) "fsGroup" ($sc.fsGroup | int64) -}}
{{- $pod := dig "securityContext" dict (include "polyaxon.dependency.live" . | fromJson) -}}
{{- if hasKey $pod "runAsUser" -}}
{{- $ids = dict "user" ($pod.runAsUser | int64) "group" ($pod.runAsGroup | default $pod.runAsUser | int64) "fsGroup" ($pod.fsGroup | default $pod.runAsGroup | default $pod.runAsUser | int64) "kept" true -}}
{{- end -}}
{{- toJson $ids -}}
{{- end -}}

{{/*
The access modes of a dependency's claim (JSON list): <component>.persistence.accessModes when
set; else those of the claim its StatefulSet already has (a StatefulSet's claim templates cannot
change); else ReadWriteOncePod, so that no second pod mounts the data, where the claim's
StorageClass is provisioned by a CSI driver the cluster lists (Kubernetes honours that mode for
CSI volumes only); else ReadWriteOnce. Offline renders see no cluster: ReadWriteOnce.
*/}}
{{- define "polyaxon.dependency.accessModes" -}}
{{- $modes := .values.persistence.accessModes | default list -}}
{{- if not $modes -}}
{{- $modes = dig "accessModes" list (include "polyaxon.dependency.live" . | fromJson) -}}
{{- end -}}
{{- if not $modes -}}
{{- $class := dict -}}
{{- with .values.persistence.storageClass -}}
{{- $class = lookup "storage.k8s.io/v1" "StorageClass" "" . | default dict -}}
{{- else -}}
{{- range (lookup "storage.k8s.io/v1" "StorageClass" "" "" | default dict).items | default list -}}
{{- if eq (dig "metadata" "annotations" "storageclass.kubernetes.io/is-default-class" "" .) "true" }}{{ $class = . }}{{ end -}}
{{- end -}}
{{- end -}}
{{- /* A CSI driver's name has no "/" (in-tree and external provisioners' names do, and the API
refuses to look them up as CSIDrivers). */ -}}
{{- $provisioner := toString ($class.provisioner | default "") -}}
{{- if and $provisioner (not (contains "/" $provisioner)) (lookup "storage.k8s.io/v1" "CSIDriver" "" $provisioner) -}}
{{- $modes = list "ReadWriteOncePod" -}}
{{- else -}}
{{- $modes = list "ReadWriteOnce" -}}
{{- end -}}
{{- end -}}
{{- toJson $modes -}}
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
      {{- include "polyaxon.dependency.accessModes" . | fromJsonArray | toYaml | nindent 6 }}
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
    {{- with .podName }}
    statefulset.kubernetes.io/pod-name: {{ . }}
    {{- end }}
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
