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

{{/*
The bucket's workload identity (artifactsStore.workloadIdentity), as JSON; {} when off: the
projected token's audience and lifetime, the volume and where it is mounted, the environment
the cloud's SDK reads (botocore's web identity; google-auth's external account) and, for gcs,
the ConfigMap with the credential configuration.
Given to the gateway, and by the runs' mutating policy to Polyaxon's own containers only.
*/}}
{{- define "polyaxon.artifactsStore.identity" -}}
{{- $s := .Values.artifactsStore -}}
{{- $w := $s.workloadIdentity | default dict -}}
{{- if and .Values.agent.enabled $w.enabled (has $s.kind (list "s3" "gcs")) -}}
{{- $dir := "/var/run/secrets/polyaxon-deploy/store-identity" -}}
{{- $token := printf "%s/token" $dir -}}
{{- $out := dict "volume" "polyaxon-store-identity" "mountPath" $dir "expirationSeconds" (int64 ($w.expirationSeconds | default 3600)) "configMap" "" -}}
{{- if eq $s.kind "s3" -}}
{{- $_ := set $out "audience" ($w.audience | default "sts.amazonaws.com") -}}
{{- /* Polyaxon reads AWS_REGION, botocore AWS_DEFAULT_REGION; AWS_ASSUME_ROLE would make
Polyaxon trade the role itself, without the token. */ -}}
{{- $env := list (dict "name" "AWS_ROLE_ARN" "value" $w.roleArn) (dict "name" "AWS_WEB_IDENTITY_TOKEN_FILE" "value" $token) -}}
{{- with $w.region }}{{ $env = concat $env (list (dict "name" "AWS_REGION" "value" .) (dict "name" "AWS_DEFAULT_REGION" "value" .)) }}{{ end -}}
{{- $_ := set $out "env" $env -}}
{{- else -}}
{{- /* Polyaxon takes any key path it is given (GOOGLE_APPLICATION_CREDENTIALS included) for a
service account's key file; with none it asks google-auth, which reads the gcloud
configuration folder's application_default_credentials.json, an external account here. */ -}}
{{- $_ := set $out "audience" $w.audience -}}
{{- $_ := set $out "configMap" (include "polyaxon.componentName" (dict "ctx" . "component" "store-identity")) -}}
{{- $_ := set $out "env" (list (dict "name" "CLOUDSDK_CONFIG" "value" $dir)) -}}
{{- end -}}
{{- toJson $out -}}
{{- else -}}
{}
{{- end -}}
{{- end -}}

{{/* gcs: the credential configuration google-auth reads (an external account whose subject
token is the projected file), the ConfigMap's application_default_credentials.json. */}}
{{- define "polyaxon.artifactsStore.identityCredentials" -}}
{{- $w := .Values.artifactsStore.workloadIdentity -}}
{{- $id := include "polyaxon.artifactsStore.identity" . | fromJson -}}
{{- $c := dict "type" "external_account" "audience" $w.provider "subject_token_type" "urn:ietf:params:oauth:token-type:jwt"
    "token_url" "https://sts.googleapis.com/v1/token" "credential_source" (dict "file" (printf "%s/token" $id.mountPath) "format" (dict "type" "text")) -}}
{{- with $w.serviceAccount -}}
{{- $_ := set $c "service_account_impersonation_url" (printf "https://iamcredentials.googleapis.com/v1/projects/-/serviceAccounts/%s:generateAccessToken" .) -}}
{{- end -}}
{{- toPrettyJson $c -}}
{{- end -}}

{{/* The projected volume of the workload identity (a pod's volumes entry). */}}
{{- define "polyaxon.artifactsStore.identityVolume" -}}
{{- $id := include "polyaxon.artifactsStore.identity" . | fromJson -}}
{{- $sources := list (dict "serviceAccountToken" (dict "audience" $id.audience "expirationSeconds" $id.expirationSeconds "path" "token")) -}}
{{- with $id.configMap -}}
{{- $sources = append $sources (dict "configMap" (dict "name" . "items" (list (dict "key" "application_default_credentials.json" "path" "application_default_credentials.json")))) -}}
{{- end -}}
{{- toJson (dict "name" $id.volume "projected" (dict "sources" $sources)) -}}
{{- end -}}

{{/* The workload identity's environment in a gateway container. */}}
{{- define "polyaxon.artifactsStore.identityEnv" -}}
{{- $id := include "polyaxon.artifactsStore.identity" . | fromJson -}}
{{- range $e := $id.env | default list }}
- name: {{ $e.name }}
  value: {{ $e.value | quote }}
{{- end }}
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
{{- with include "polyaxon.artifactsStore.identity" .ctx | fromJson }}
- name: {{ .volume }}
  mountPath: {{ .mountPath }}
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
{{- if include "polyaxon.artifactsStore.identity" . | fromJson }}
- {{ include "polyaxon.artifactsStore.identityVolume" . | fromJson | toYaml | nindent 2 | trim }}
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
