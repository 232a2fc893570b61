{{/*
The artifacts store and connections, in the shape Polyaxon's agent reads (a V1Connection:
name, kind, schema, secret). The agent mounts the store into every run; the gateway (API and
streams) mounts it too, to serve outputs, logs and uploads.
*/}}

{{- define "polyaxon.artifactsStore.volumeKinds" -}}
["volume_claim","host_path"]
{{- end -}}

{{- define "polyaxon.artifactsStore.bucketKinds" -}}
{"s3":"s3://","gcs":"gs://","wasb":"wasb"}
{{- end -}}

{{- define "polyaxon.artifactsStore.isVolume" -}}
{{- if has .Values.artifactsStore.kind (include "polyaxon.artifactsStore.volumeKinds" . | fromJsonArray) }}true{{ end -}}
{{- end -}}

{{/* The claim the store uses: an existing one, or the one the chart creates. */}}
{{- define "polyaxon.artifactsStore.claimName" -}}
{{- .Values.artifactsStore.persistence.existingClaim | default (include "polyaxon.componentName" (dict "ctx" . "component" "artifacts")) -}}
{{- end -}}

{{- define "polyaxon.artifactsStore.createsClaim" -}}
{{- if and .Values.agent.enabled (eq .Values.artifactsStore.kind "volume_claim") (not .Values.artifactsStore.persistence.existingClaim) }}true{{ end -}}
{{- end -}}

{{/* POLYAXON_AGENT_ARTIFACTS_STORE: the store as a Polyaxon connection (JSON). */}}
{{- define "polyaxon.artifactsStore.connection" -}}
{{- $s := .Values.artifactsStore -}}
{{- $conn := dict "name" $s.name "kind" $s.kind -}}
{{- if eq $s.kind "volume_claim" -}}
{{- $_ := set $conn "schema" (dict "volumeClaim" (include "polyaxon.artifactsStore.claimName" .) "mountPath" $s.mountPath) -}}
{{- else if eq $s.kind "host_path" -}}
{{- $_ := set $conn "schema" (dict "hostPath" $s.hostPath "mountPath" $s.mountPath) -}}
{{- else -}}
{{- $_ := set $conn "schema" (dict "bucket" $s.bucket) -}}
{{- end -}}
{{- with $s.secret.name -}}
{{- $secret := dict "name" . -}}
{{- with $s.secret.mountPath }}{{ $_ := set $secret "mountPath" . }}{{ end -}}
{{- $_ := set $conn "secret" $secret -}}
{{- end -}}
{{- toJson $conn -}}
{{- end -}}

{{/* The store's credentials as environment variables of the gateway (a Secret without mountPath). */}}
{{- define "polyaxon.artifactsStore.envFrom" -}}
{{- $s := .Values.artifactsStore -}}
{{- if and .Values.agent.enabled $s.secret.name (not $s.secret.mountPath) }}
- secretRef:
    name: {{ $s.secret.name }}
{{- end }}
{{- end -}}

{{/* The store's mounts in a gateway container: (dict "ctx" $ "readOnly" true) for streams. */}}
{{- define "polyaxon.artifactsStore.volumeMounts" -}}
{{- $s := .ctx.Values.artifactsStore -}}
{{- if .ctx.Values.agent.enabled }}
{{- if include "polyaxon.artifactsStore.isVolume" .ctx }}
- name: artifacts-store
  mountPath: {{ $s.mountPath }}
  {{- if .readOnly }}
  readOnly: true
  {{- end }}
{{- end }}
{{- if and $s.secret.name $s.secret.mountPath }}
- name: artifacts-store-secret
  mountPath: {{ $s.secret.mountPath }}
  readOnly: true
{{- end }}
{{- end }}
{{- end -}}

{{- define "polyaxon.artifactsStore.volumes" -}}
{{- $s := .Values.artifactsStore -}}
{{- if .Values.agent.enabled }}
{{- if eq $s.kind "volume_claim" }}
- name: artifacts-store
  persistentVolumeClaim:
    claimName: {{ include "polyaxon.artifactsStore.claimName" . }}
{{- else if eq $s.kind "host_path" }}
- name: artifacts-store
  hostPath:
    path: {{ $s.hostPath }}
    type: DirectoryOrCreate
{{- end }}
{{- if and $s.secret.name $s.secret.mountPath }}
- name: artifacts-store-secret
  secret:
    secretName: {{ $s.secret.name }}
{{- end }}
{{- end }}
{{- end -}}

{{/*
Mount paths Polyaxon reserves in run pods (cli `_contexts/paths.py`): a connection mounted there
would hide Polyaxon's own files.
*/}}
{{- define "polyaxon.connections.reservedPaths" -}}
["/plx-context","/opt/polyaxon","/dev/shm","/var/run/docker.sock"]
{{- end -}}

{{/*
Every path a run may get mounted, with the values path that sets it, as a JSON list of
{path, at}. Used to refuse collisions at render time.
*/}}
{{- define "polyaxon.connections.mounts" -}}
{{- $out := list -}}
{{- $s := .Values.artifactsStore -}}
{{- if include "polyaxon.artifactsStore.isVolume" . -}}
{{- $out = append $out (dict "path" $s.mountPath "at" "artifactsStore.mountPath") -}}
{{- end -}}
{{- if $s.secret.mountPath -}}
{{- $out = append $out (dict "path" $s.secret.mountPath "at" "artifactsStore.secret.mountPath") -}}
{{- end -}}
{{- range $i, $c := .Values.connections -}}
{{- $schema := $c.schema | default dict -}}
{{- with $schema.mountPath -}}
{{- $out = append $out (dict "path" . "at" (printf "connections[%d].schema.mountPath" $i)) -}}
{{- end -}}
{{- range $res := list "secret" "configMap" -}}
{{- with (index $c $res | default dict).mountPath -}}
{{- $out = append $out (dict "path" . "at" (printf "connections[%d].%s.mountPath" $i $res)) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- toJson $out -}}
{{- end -}}
