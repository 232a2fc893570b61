{{/*
Render-time checks with errors that name the value and the fix. Run by validate-values.yaml,
which every render includes.
*/}}
{{- define "polyaxon.validate" -}}
{{- include "polyaxon.validate.version" . -}}
{{- $runsNS := include "polyaxon.runs.namespace" . -}}
{{- if or (gt (len $runsNS) 63) (not (regexMatch "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$" $runsNS)) -}}
{{- fail (printf "values: runs.namespace is %q: a namespace name is at most 63 lowercase letters, digits and '-', starting and ending with a letter or digit; set runs.namespace to one (e.g. {{ .Release.Namespace }}-runs)" $runsNS) -}}
{{- end -}}
{{- $_ := include "polyaxon.scheduling.nodeSelectors" . -}}
{{- if and (not .Values.postgresql.enabled) (not .Values.externalServices.postgresql.host) -}}
{{- fail "values: postgresql.enabled is false and externalServices.postgresql.host is empty: the platform needs a database; set postgresql.enabled=true or externalServices.postgresql.host" -}}
{{- end -}}
{{- if and .Values.postgresql.enabled .Values.externalServices.postgresql.host -}}
{{- fail "values: both postgresql.enabled and externalServices.postgresql.host are set: choose one (set postgresql.enabled=false to use the external database)" -}}
{{- end -}}
{{- include "polyaxon.validate.postgresqlMode" . -}}
{{- range $c := list "scheduler" "worker" "beat" -}}
{{- if and (index $.Values $c).enabled (not (include "polyaxon.broker.available" $)) -}}
{{- fail (printf "values: %s.enabled needs the broker %q, which is not available: set %s.enabled=true or externalServices.%s.host" $c $.Values.broker $.Values.broker $.Values.broker) -}}
{{- end -}}
{{- end -}}
{{- range $c := list "worker" "beat" -}}
{{- if and (index $.Values $c).enabled (not $.Values.scheduler.enabled) -}}
{{- fail (printf "values: %s.enabled needs scheduler.enabled: the API hands work to Celery (POLYAXON_SCHEDULER_ENABLED) only when the scheduler runs; set scheduler.enabled=true or %s.enabled=false" $c $c) -}}
{{- end -}}
{{- end -}}
{{- if and .Values.ssl.enabled (not .Values.ssl.secretName) -}}
{{- fail "values: ssl.enabled is true but ssl.secretName is empty: name a Secret of type kubernetes.io/tls" -}}
{{- end -}}
{{- if and .Values.migrations.renderJob .Values.migrations.useHelmHooks -}}
{{- fail "values: migrations.renderJob is set by polyaxon-deploy only; with migrations.useHelmHooks=true leave it false" -}}
{{- end -}}
{{- include "polyaxon.validate.gatewayProxy" . -}}
{{- include "polyaxon.validate.dataStoreIds" . -}}
{{- include "polyaxon.validate.httpRoute" . -}}
{{- include "polyaxon.validate.artifactsStore" . -}}
{{- include "polyaxon.validate.connections" . -}}
{{- include "polyaxon.validate.runsIdentityAnnotations" . -}}
{{- include "polyaxon.validate.tolerations" . -}}
{{- include "polyaxon.validate.pdbs" . -}}
{{- include "polyaxon.validate.runsBounds" . -}}
{{- include "polyaxon.validate.metrics" . -}}
{{- include "polyaxon.validate.backup" . -}}
{{- end -}}

{{/* postgresql.mode and what a CloudNativePG Cluster needs. */}}
{{- define "polyaxon.validate.postgresqlMode" -}}
{{- $pg := .Values.postgresql -}}
{{- $mode := $pg.mode | default "statefulset" -}}
{{- if not (has $mode (list "statefulset" "cloudnativepg")) -}}
{{- fail (printf "values: postgresql.mode is %q: set it to statefulset (one Postgres pod) or cloudnativepg (a CloudNativePG Cluster); for an external database set postgresql.enabled=false and externalServices.postgresql.host" $mode) -}}
{{- end -}}
{{- if and $pg.enabled (eq $mode "cloudnativepg") -}}
{{- $cnpg := $pg.cloudnativepg -}}
{{- if lt ($cnpg.instances | int) 1 -}}
{{- fail (printf "values: postgresql.cloudnativepg.instances is %v: a Cluster needs at least 1 instance, and 2 or more to survive a node (3 is the chart's default)" $cnpg.instances) -}}
{{- end -}}
{{- if not $pg.persistence.enabled -}}
{{- fail "values: postgresql.persistence.enabled is false with postgresql.mode=cloudnativepg: every CloudNativePG instance keeps its data on a claim of postgresql.persistence.size; set postgresql.persistence.enabled=true" -}}
{{- end -}}
{{- if not (has $cnpg.podAntiAffinityType (list "required" "preferred")) -}}
{{- fail (printf "values: postgresql.cloudnativepg.podAntiAffinityType is %q: set required (one instance per node) or preferred" $cnpg.podAntiAffinityType) -}}
{{- end -}}
{{- if not .Values.networkPolicy.enabled -}}
{{- fail "values: postgresql.mode=cloudnativepg needs networkPolicy.enabled=true: each instance serves CloudNativePG's instance manager on port 8000 without authentication (its status, its backups), and without the release's NetworkPolicies every pod, a run's too, reaches it; set networkPolicy.enabled=true (the production profile does)" -}}
{{- end -}}
{{- $name := include "polyaxon.postgresql.clusterName" . -}}
{{- if gt (len $name) 50 -}}
{{- fail (printf "values: postgresql.mode=cloudnativepg names its Cluster %q, %d characters: CloudNativePG takes at most 50; set fullnameOverride to a shorter name" $name (len $name)) -}}
{{- end -}}
{{- if not $cnpg.topologyKey -}}
{{- fail "values: postgresql.cloudnativepg.topologyKey is empty: name the node label the instances spread across (kubernetes.io/hostname)" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* Scheduled backups: somewhere to go, sealed, pruned, from the in-cluster database. */}}
{{- define "polyaxon.validate.backup" -}}
{{- $b := .Values.backup -}}
{{- if $b.schedule -}}
{{- if not .Values.postgresql.enabled -}}
{{- fail "values: backup.schedule dumps the in-cluster Postgres through its pod, and postgresql.enabled is false: back an external database up with its provider's backups, or run `polyaxon-deploy backup --local` where the PostgreSQL client is; or leave backup.schedule empty" -}}
{{- end -}}
{{- if eq (include "polyaxon.postgresql.mode" .) "cloudnativepg" -}}
{{- fail "values: backup.schedule execs into the StatefulSet's Postgres pod by name, and postgresql.mode is cloudnativepg, whose primary moves between pods: run `polyaxon-deploy backup` (it finds the primary) from a scheduler of yours, or leave backup.schedule empty" -}}
{{- end -}}
{{- if and $b.location $b.persistence.existingClaim -}}
{{- fail "values: backup.location and backup.persistence.existingClaim are both set: choose one place for the backups" -}}
{{- end -}}
{{- if not (or $b.location $b.persistence.existingClaim) -}}
{{- fail "values: backup.schedule is set but the backups have nowhere to go: set backup.location to s3://BUCKET/PREFIX, or backup.persistence.existingClaim to a PersistentVolumeClaim" -}}
{{- end -}}
{{- if not $b.encryptTo -}}
{{- fail "values: backup.encryptTo is empty: a backup holds the release's Secrets; give the age public keys (age1..., from age-keygen) of those who may restore it" -}}
{{- end -}}
{{- if not (or $b.retention.keepLast $b.retention.keepWithin) -}}
{{- fail "values: backup.retention keeps everything (keepLast 0, keepWithin empty): the backups would fill their store; set backup.retention.keepLast and/or keepWithin (e.g. 7 and 720h)" -}}
{{- end -}}
{{- $a := .Values.artifactsStore -}}
{{- if and $b.secret.name (eq $b.secret.name (toString $a.secret.name)) -}}
{{- fail (printf "values: backup.secret.name is %q, the artifacts store's Secret, which run pods get: any run could then write, forge or delete the backups; give the backups keys of their own, in a Secret of their own" $b.secret.name) -}}
{{- end -}}
{{- if and $b.location $a.bucket (eq (regexReplaceAll "^s3://([^/]+).*$" $b.location "${1}") (regexReplaceAll "^[a-z0-9]+://([^/]+).*$" (toString $a.bucket) "${1}")) (eq $a.kind "s3") -}}
{{- fail (printf "values: backup.location %s is in the artifacts store's bucket, which run pods write: give the backups a bucket of their own" $b.location) -}}
{{- end -}}
{{- $cron := include "polyaxon.componentName" (dict "ctx" . "component" "backup") -}}
{{- if gt (len $cron) 52 -}}
{{- fail (printf "values: the backup CronJob's name %q is %d characters, over the 52 Kubernetes allows a CronJob: shorten fullnameOverride (or the release's name)" $cron (len $cron)) -}}
{{- end -}}
{{- include "polyaxon.validate.secretExists" (dict "ctx" . "name" $b.secret.name "at" "backup.secret.name" "namespaces" (list .Release.Namespace)) -}}
{{- end -}}
{{- end -}}

{{/* The metrics ports stay closed to every namespace but the scraper's. */}}
{{- define "polyaxon.validate.metrics" -}}
{{- if and .Values.metrics.enabled .Values.networkPolicy.enabled (not .Values.metrics.scraperNamespaceSelector) -}}
{{- fail "values: metrics.scraperNamespaceSelector is empty: with networkPolicy.enabled it would open the metrics ports (Postgres's and Redis's exporters, the operator's) to every namespace, run pods' among them; name the namespace of your Prometheus (e.g. {kubernetes.io/metadata.name: monitoring})" -}}
{{- end -}}
{{- if and (or .Values.metrics.serviceMonitor.enabled .Values.metrics.prometheusRule.enabled) (not .Values.metrics.enabled) -}}
{{- fail "values: metrics.serviceMonitor.enabled or metrics.prometheusRule.enabled is set but metrics.enabled is false: there would be no exporter to scrape and no target for the alerts; set metrics.enabled=true" -}}
{{- end -}}
{{- end -}}

{{/*
The runs' quota, LimitRange and emptyDir sizes (runs.quota, runs.limitRange, runs.emptyDir):
no LoadBalancer or NodePort Service allowed back in, no default above its bound, and a cpu,
memory or disk quota only with the LimitRange defaults a container without its own needs (the
quota refuses a container without a request and a limit of what it bounds: Polyaxon's sidecar
and init containers set no cpu limit).
*/}}
{{- define "polyaxon.validate.runsBounds" -}}
{{- range $k := list "services.loadbalancers" "services.nodeports" -}}
{{- $v := index (($.Values.runs.quota | default dict).hard | default dict) $k -}}
{{- if and (not (kindIs "invalid" $v)) (gt (float64 (include "polyaxon.quantity" (dict "value" $v "at" (printf "runs.quota.hard.%s" $k)))) 0.0) -}}
{{- fail (printf "values: runs.quota.hard.%s is %v: a run may not open a port on every node (NodePort) or a cloud load balancer (LoadBalancer), so the runs' quota keeps services.loadbalancers and services.nodeports at 0; remove %s from runs.quota.hard, and reach a run's service through the gateway" $k $v $k) -}}
{{- end -}}
{{- end -}}
{{- $e := include "polyaxon.runs.emptyDirSizes" . | fromJson -}}
{{- range $pair := list (list "sizeLimit" "disk" "maxSizeLimit" "maxDisk") (list "memorySizeLimit" "memory" "maxMemorySizeLimit" "maxMemory") -}}
{{- $def := index $e (index $pair 1) -}}
{{- $max := index $e (index $pair 3) -}}
{{- if and $def $max -}}
{{- $at := printf "runs.emptyDir.%s" (index $pair 0) -}}
{{- $maxAt := printf "runs.emptyDir.%s" (index $pair 2) -}}
{{- if gt (float64 (include "polyaxon.quantity" (dict "value" $def "at" $at))) (float64 (include "polyaxon.quantity" (dict "value" $max "at" $maxAt))) -}}
{{- fail (printf "values: %s is %s, above %s %s: every run's emptyDir without a size would get one its own bound refuses; lower %s, or raise %s" $at $def $maxAt $max $at $maxAt) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if include "polyaxon.runs.bounded" . -}}
{{- $l := .Values.runs.limitRange | default dict -}}
{{- $names := list -}}
{{- range $field := list "defaultRequest" "default" "max" }}{{ range $k, $_ := index $l $field | default dict }}{{ $names = append $names $k }}{{ end }}{{ end -}}
{{- range $r := $names | uniq | sortAlpha -}}
{{- $at := dict -}}
{{- $n := dict -}}
{{- range $field := list "defaultRequest" "default" "max" -}}
{{- $v := index (index $l $field | default dict) $r -}}
{{- if and (not (kindIs "invalid" $v)) (ne (toString $v) "") -}}
{{- $path := printf "runs.limitRange.%s.%s" $field $r -}}
{{- $_ := set $at $field (printf "%s %v" $path (include "polyaxon.quantityText" $v)) -}}
{{- $_ := set $n $field (float64 (include "polyaxon.quantity" (dict "value" $v "at" $path))) -}}
{{- end -}}
{{- end -}}
{{- range $p := list (list "default" "max") (list "defaultRequest" "max") (list "defaultRequest" "default") -}}
{{- $lo := index $p 0 }}{{ $hi := index $p 1 -}}
{{- if and (hasKey $n $lo) (hasKey $n $hi) (gt (index $n $lo) (index $n $hi)) -}}
{{- fail (printf "values: %s is above %s: the API server refuses such a LimitRange (a container given the default could never be admitted); lower runs.limitRange.%s.%s, or raise runs.limitRange.%s.%s (polyaxon-deploy sizes max from the largest run-pool node: set it yourself to keep yours)" (index $at $lo) (index $at $hi) $lo $r $hi $r) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- $hard := include "polyaxon.runs.quotaHard" . | fromJson -}}
{{- range $r := list "cpu" "memory" "ephemeral-storage" -}}
{{- $lim := index ($l.default | default dict) $r | default (index ($l.max | default dict) $r) -}}
{{- $req := index ($l.defaultRequest | default dict) $r | default $lim -}}
{{- if and (hasKey $hard (printf "limits.%s" $r)) (not $lim) -}}
{{- fail (printf "values: the runs' quota bounds limits.%s (runs.quota) but runs.limitRange gives a container without a %s limit none, so the quota would refuse it (Polyaxon's init and sidecar containers among them); set runs.limitRange.default.%s (and runs.limitRange.defaultRequest.%s)" $r $r $r $r) -}}
{{- end -}}
{{- if and (or (hasKey $hard (printf "requests.%s" $r)) (hasKey $hard $r)) (not $req) -}}
{{- fail (printf "values: the runs' quota bounds requests.%s (runs.quota) but runs.limitRange gives a container without a %s request none, so the quota would refuse it (Polyaxon's init and sidecar containers among them); set runs.limitRange.defaultRequest.%s" $r $r $r) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
Tolerations the API server would accept but that cannot mean what was meant, in every list
the values hold: the categories', the components' and the dependencies'.
*/}}
{{- define "polyaxon.validate.tolerations" -}}
{{- $lists := dict -}}
{{- range $cat, $l := .Values.tolerations }}{{ $_ := set $lists (printf "tolerations.%s" $cat) $l }}{{ end -}}
{{- range $c := list "gateway" "scheduler" "worker" "beat" "agent" "operator" "postgresql" "rabbitmq" "redis" -}}
{{- $_ := set $lists (printf "%s.tolerations" $c) ((index $.Values $c).tolerations | default list) -}}
{{- end -}}
{{- range $at, $l := $lists -}}
{{- range $i, $t := $l -}}
{{- if and (eq (toString $t.operator) "Exists") $t.value -}}
{{- fail (printf "values: %s[%d]: operator Exists matches every value of the key, so value %q is meaningless: remove value, or use operator Equal" $at $i (toString $t.value)) -}}
{{- end -}}
{{- if and (hasKey $t "tolerationSeconds") (not (kindIs "invalid" $t.tolerationSeconds)) (ne (toString $t.effect) "NoExecute") -}}
{{- fail (printf "values: %s[%d]: tolerationSeconds only applies to effect NoExecute (how long a pod stays once the taint appears), here the effect is %q: remove tolerationSeconds, or set effect: NoExecute" $at $i (toString ($t.effect | default "any"))) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
PodDisruptionBudgets that would stop every node drain: nothing may ever be evicted when the
budget keeps all replicas (a single replica with minAvailable 1, maxUnavailable 0, or more than
100%).
*/}}
{{- define "polyaxon.validate.pdbs" -}}
{{- range $c := list "gateway" "scheduler" "worker" "agent" "operator" -}}
{{- $v := index $.Values $c -}}
{{- $replicas := int ($v.replicas | default 1) -}}
{{- if and $v.pdb.enabled (or (eq $c "gateway") $v.enabled) -}}
{{- $min := $v.pdb.minAvailable -}}
{{- if not (kindIs "invalid" $min) -}}
{{- if kindIs "string" $min -}}
{{- $pct := int (trimSuffix "%" $min) -}}
{{- if gt $pct 100 -}}
{{- fail (printf "values: %s.pdb.minAvailable: %s is more than every pod: use a percentage up to 100%%, a count, or maxUnavailable" $c $min) -}}
{{- end -}}
{{- if and (eq $pct 100) -}}
{{- fail (printf "values: %s.pdb.minAvailable: 100%% keeps every pod, so no node drain can ever evict one: lower it or use maxUnavailable: 1" $c) -}}
{{- end -}}
{{- else if ge (int $min) $replicas -}}
{{- fail (printf "values: %s.pdb.minAvailable is %d with %s %d replica(s): no pod may ever be evicted, so node drains hang; lower minAvailable, use maxUnavailable: 1, or run more replicas" $c (int $min) $c $replicas) -}}
{{- end -}}
{{- else if eq (toString $v.pdb.maxUnavailable) "0" -}}
{{- fail (printf "values: %s.pdb.maxUnavailable is 0: no pod may ever be evicted, so node drains hang; use 1 (or a percentage)" $c) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* True when lookups reach a cluster (offline renders see nothing, so they check nothing). */}}
{{- define "polyaxon.online" -}}
{{- if lookup "v1" "Namespace" "" "kube-system" }}true{{ end -}}
{{- end -}}

{{/*
(dict "ctx" $ "name" "my-secret" "at" "artifactsStore.secret.name" "namespaces" (list "polyaxon")):
the Secret exists in each namespace. The runs' own namespace, before the release creates it,
is not looked in: nothing can be in it yet.
*/}}
{{- define "polyaxon.validate.secretExists" -}}
{{- if and .name (include "polyaxon.online" .ctx) -}}
{{- range $ns := .namespaces -}}
{{- $unborn := and (ne $ns $.ctx.Release.Namespace) (not (lookup "v1" "Namespace" "" $ns)) -}}
{{- if and (not $unborn) (not (lookup "v1" "Secret" $ns $.name)) -}}
{{- fail (printf "values: %s: Secret %q not found in namespace %q: create it first (kubectl -n %s create secret generic %s --from-literal=KEY=VALUE ...), or fix the name" $.at $.name $ns $ns $.name) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "polyaxon.validate.absolutePath" -}}
{{- if not (hasPrefix "/" (toString .path)) -}}
{{- fail (printf "values: %s: %q is not an absolute path: write it from the root, e.g. /%s" .at (toString .path) (trimPrefix "./" (toString .path))) -}}
{{- end -}}
{{- end -}}

{{- define "polyaxon.validate.artifactsStore" -}}
{{- $s := .Values.artifactsStore -}}
{{- if .Values.agent.enabled -}}
{{- $buckets := include "polyaxon.artifactsStore.bucketKinds" . | fromJson -}}
{{- if not $s.name -}}
{{- fail "values: artifactsStore.name is empty: runs refer to the store by this name; set it, e.g. artifacts" -}}
{{- end -}}
{{- if hasKey $buckets $s.kind -}}
{{- $prefix := index $buckets $s.kind -}}
{{- if not (hasPrefix $prefix (toString $s.bucket)) -}}
{{- fail (printf "values: artifactsStore.bucket: the %s store needs a bucket URL starting with %q (got %q), e.g. %sbucket-name" $s.kind $prefix (toString $s.bucket) (ternary "wasbs://container@account.blob.core.windows.net/" $prefix (eq $s.kind "wasb"))) -}}
{{- end -}}
{{- $w := $s.workloadIdentity | default dict -}}
{{- if and (not $s.secret.name) (not $w.enabled) -}}
{{- fail (printf "values: artifactsStore.secret.name is empty: the %s bucket needs credentials; create a Secret with them and name it here (see values/artifacts-%s.yaml), or reach it with the ServiceAccounts' token: artifactsStore.workloadIdentity.enabled (see values/artifacts-workload-identity.yaml)" $s.kind $s.kind) -}}
{{- end -}}
{{- if $w.enabled -}}
{{- include "polyaxon.validate.workloadIdentity" . -}}
{{- end -}}
{{- else if eq $s.kind "host_path" -}}
{{- include "polyaxon.validate.absolutePath" (dict "path" $s.hostPath "at" "artifactsStore.hostPath") -}}
{{- else if ne $s.kind "volume_claim" -}}
{{- fail (printf "values: artifactsStore.kind: %q is not a store kind: use volume_claim, host_path, s3, gcs or wasb" $s.kind) -}}
{{- end -}}
{{- $p := $s.persistence -}}
{{- if $p.sharedVolume -}}
{{- if $p.existingClaim -}}
{{- fail "values: artifactsStore.persistence.sharedVolume and existingClaim are both set: the chart makes volumes on sharedVolume for the claims it creates; leave existingClaim empty, or bind your own claims and drop sharedVolume" -}}
{{- end -}}
{{- if or $p.volumeName $p.runsVolumeName -}}
{{- fail "values: artifactsStore.persistence.sharedVolume and volumeName/runsVolumeName are both set: with sharedVolume the chart makes and names the volumes; set one or the other" -}}
{{- end -}}
{{- end -}}
{{- if include "polyaxon.artifactsStore.isVolume" . -}}
{{- include "polyaxon.validate.absolutePath" (dict "path" $s.mountPath "at" "artifactsStore.mountPath") -}}
{{- end -}}
{{- if $s.secret.mountPath -}}
{{- include "polyaxon.validate.absolutePath" (dict "path" $s.secret.mountPath "at" "artifactsStore.secret.mountPath") -}}
{{- end -}}
{{- include "polyaxon.validate.secretExists" (dict "ctx" . "name" $s.secret.name "at" "artifactsStore.secret.name" "namespaces" (list .Release.Namespace (include "polyaxon.runs.namespace" .) | uniq)) -}}
{{- end -}}
{{- end -}}

{{/*
artifactsStore.workloadIdentity: the cloud's fields for the store's kind, no keys beside it, a
lifetime the runs' policy admits, and the API server's MutatingAdmissionPolicy, which alone gives
the token to Polyaxon's containers and not to the run's.
*/}}
{{- define "polyaxon.validate.workloadIdentity" -}}
{{- $s := .Values.artifactsStore -}}
{{- $w := $s.workloadIdentity -}}
{{- if $s.secret.name -}}
{{- fail (printf "values: artifactsStore.workloadIdentity.enabled and artifactsStore.secret.name (%q) are both set: the cloud's SDK would take the keys and never the token; drop one" $s.secret.name) -}}
{{- end -}}
{{- if eq $s.kind "wasb" -}}
{{- fail "values: artifactsStore.workloadIdentity.enabled with a wasb store: Polyaxon 2.18 cannot reach Azure Blob Storage with a workload identity (it hands AZURE_CLIENT_ID to adlfs as a client-secret credential with no secret, vents azure/service.py); use artifactsStore.secret with the account's key or a SAS token" -}}
{{- end -}}
{{- $need := dict "s3" (list "roleArn") "gcs" (list "provider" "audience") -}}
{{- range $f := index $need $s.kind -}}
{{- if not (index $w $f) -}}
{{- fail (printf "values: artifactsStore.workloadIdentity.%s is empty: a %s bucket reached with a workload identity needs it (see values/artifacts-workload-identity.yaml)" $f $s.kind) -}}
{{- end -}}
{{- end -}}
{{- $exp := int ($w.expirationSeconds | default 3600) -}}
{{- if or (lt $exp 600) (gt $exp (int .Values.runs.maxTokenSeconds)) -}}
{{- fail (printf "values: artifactsStore.workloadIdentity.expirationSeconds is %d: the API server projects tokens of 600 s or more, and run pods may hold one for at most runs.maxTokenSeconds (%d); set it between the two" $exp (int .Values.runs.maxTokenSeconds)) -}}
{{- end -}}
{{- if not (include "polyaxon.runs.sidecarGuardCommand" . | fromJsonArray) -}}
{{- fail "values: artifactsStore.workloadIdentity.enabled needs the API server's MutatingAdmissionPolicy (admissionregistration.k8s.io/v1), which gives the token to Polyaxon's own containers of a run pod only; this cluster does not serve it: use artifactsStore.secret" -}}
{{- end -}}
{{- end -}}

{{/* A cloud's workload-identity webhook gives the token to every container of a pod whose
account carries its annotation: on the runs' account, to the run's own code. */}}
{{- define "polyaxon.validate.runsIdentityAnnotations" -}}
{{- range $k, $_ := .Values.runs.serviceAccount.annotations | default dict -}}
{{- if has $k (list "eks.amazonaws.com/role-arn" "azure.workload.identity/client-id" "iam.gke.io/gcp-service-account") -}}
{{- fail (printf "values: runs.serviceAccount.annotations has %q: the cloud would give its identity to every container of a run pod, the run's own code included (and the runs' policies refuse such a pod); for the artifacts bucket use artifactsStore.workloadIdentity, which gives it to Polyaxon's own containers only" $k) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* Connections: named once each; no two mounts on one path, none over Polyaxon's own paths. */}}
{{- define "polyaxon.validate.connections" -}}
{{- $names := dict $.Values.artifactsStore.name "artifactsStore.name" -}}
{{- range $i, $c := .Values.connections -}}
{{- if not $c.name -}}
{{- fail (printf "values: connections[%d].name is empty: runs request a connection by name; set one" $i) -}}
{{- end -}}
{{- if hasKey $names $c.name -}}
{{- fail (printf "values: connections[%d].name: %q is already used by %s: give each connection its own name" $i $c.name (index $names $c.name)) -}}
{{- end -}}
{{- $_ := set $names $c.name (printf "connections[%d].name" $i) -}}
{{- range $res := list "secret" "configMap" -}}
{{- $r := index $c $res | default dict -}}
{{- if and $r (not $r.name) -}}
{{- fail (printf "values: connections[%d].%s.name is empty: name the %s to mount" $i $res (ternary "Secret" "ConfigMap" (eq $res "secret"))) -}}
{{- end -}}
{{- end -}}
{{- with $c.secret }}{{ include "polyaxon.validate.secretExists" (dict "ctx" $ "name" .name "at" (printf "connections[%d].secret.name" $i) "namespaces" (list (include "polyaxon.runs.namespace" $))) }}{{ end -}}
{{- end -}}
{{- $mounts := include "polyaxon.connections.mounts" . | fromJsonArray -}}
{{- $reserved := include "polyaxon.connections.reservedPaths" . | fromJsonArray -}}
{{- range $i, $a := $mounts -}}
{{- include "polyaxon.validate.absolutePath" (dict "path" $a.path "at" $a.at) -}}
{{- $pa := trimSuffix "/" $a.path -}}
{{- range $r := $reserved -}}
{{- if or (eq $pa $r) (hasPrefix (printf "%s/" $r) $pa) (hasPrefix (printf "%s/" $pa) $r) (eq $pa "") -}}
{{- fail (printf "values: %s: %q would hide Polyaxon's own %s in run pods: mount it elsewhere, e.g. /connections/<name>" $a.at $a.path $r) -}}
{{- end -}}
{{- end -}}
{{- range $j, $b := $mounts -}}
{{- $pb := trimSuffix "/" $b.path -}}
{{- if and (lt $i $j) (or (eq $pa $pb) (hasPrefix (printf "%s/" $pa) $pb) (hasPrefix (printf "%s/" $pb) $pa)) -}}
{{- fail (printf "values: %s %q collides with %s %q: a run would get one mounted over the other; give each its own directory" $b.at $b.path $a.at $a.path) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
The Polyaxon version against the range the chart supports, and what that version no longer
has: RabbitMQ as broker (removed in 2.17, haupt/schemas/platform_config.py accepts
POLYAXON_BROKER_BACKEND=redis only).
*/}}
{{- define "polyaxon.validate.version" -}}
{{- $v := include "polyaxon.version" . -}}
{{- $range := index .Chart.Annotations "polyaxon-deploy/polyaxon-versions" -}}
{{- if not (semverCompare $range $v) -}}
{{- fail (printf "values: polyaxon.version %q is outside the Polyaxon versions chart %s supports (%s): set polyaxon.version to one in that range, or use a chart made for %s" $v .Chart.Version $range $v) -}}
{{- end -}}
{{- if semverCompare ">=2.17.0-0" $v -}}
{{- if eq .Values.broker "rabbitmq" -}}
{{- fail (printf "values: broker: rabbitmq: Polyaxon %s has no RabbitMQ broker (removed in 2.17): set broker=redis with redis.enabled=true or externalServices.redis.host, and rabbitmq.enabled=false" $v) -}}
{{- end -}}
{{- if or .Values.rabbitmq.enabled .Values.externalServices.rabbitmq.host -}}
{{- fail (printf "values: rabbitmq.enabled/externalServices.rabbitmq.host: Polyaxon %s does not use RabbitMQ (removed in 2.17): set rabbitmq.enabled=false and externalServices.rabbitmq.host empty" $v) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
A data store's ids are its own: with the platform's (securityContext.*, which runs get by
default) a run pod would own its files. Ids kept from a running StatefulSet are not refused
(its data is owned by them): the NOTES say so.
*/}}
{{- define "polyaxon.validate.dataStoreIds" -}}
{{- if .Values.securityContext.enabled -}}
{{- $taken := include "polyaxon.securityContext.taken" . | fromJsonArray -}}
{{- range $s := include "polyaxon.dataStores" . | fromJsonArray -}}
{{- if not $s.kept -}}
{{- range $k := list "user" "group" "fsGroup" -}}
{{- if has (toString (index $s $k)) $taken -}}
{{- fail (printf "values: %s.securityContext.%s is %v, an id of the platform's pods and, by default, of every run pod (securityContext.user/group/fsGroup): runs would own the %s data; give %s.securityContext ids of its own (or leave the chart's)" $s.name $k (index $s $k) $s.name $s.name) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
An HTTPRoute needs a Gateway to attach to; an Ingress may stay for other hosts, never for one the
route answers too (two ways in for one host, with two TLS setups).
*/}}
{{- define "polyaxon.validate.httpRoute" -}}
{{- $r := .Values.httpRoute -}}
{{- if $r.enabled -}}
{{- if not $r.parentRefs -}}
{{- fail "values: httpRoute.enabled is true but httpRoute.parentRefs is empty: name the Gateway to attach to, e.g. httpRoute.parentRefs[0].name=public, httpRoute.parentRefs[0].namespace=gateway-system" -}}
{{- end -}}
{{- if .Values.ingress.enabled -}}
{{- $host := .Values.ingress.host -}}
{{- $same := or (not $host) (not $r.hostnames) (has $host $r.hostnames) -}}
{{- range $r.hostnames }}{{ if and (hasPrefix "*." .) (hasSuffix (trimPrefix "*" .) $host) }}{{ $same = true }}{{ end }}{{ end -}}
{{- if $same -}}
{{- fail (printf "values: ingress.enabled and httpRoute.enabled both answer host %q (ingress.host %q, httpRoute.hostnames %v; empty means every host): choose one for each host, e.g. ingress.enabled=false" ($host | default "*") $host $r.hostnames) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
haupt listens on the gateway pod's loopback behind nginx (gateway/_proxy.tpl): a value that
would point the Service or the probes straight at haupt, or start haupt on another address,
is refused.
*/}}
{{- define "polyaxon.validate.gatewayProxy" -}}
{{- $g := .Values.gateway -}}
{{- $ports := dict "gateway.proxy.apiPort" (int $g.proxy.apiPort) "gateway.proxy.streamsPort" (int $g.proxy.streamsPort) -}}
{{- range $name, $port := $ports -}}
{{- if eq $port (int $g.service.targetPort) -}}
{{- fail (printf "values: %s is %d, the same as gateway.service.targetPort: that port is nginx's, in front of haupt; haupt must listen on another loopback port (set %s to a free one, e.g. %d)" $name $port $name (add $port 1)) -}}
{{- end -}}
{{- end -}}
{{- if eq (int $g.proxy.apiPort) (int $g.proxy.streamsPort) -}}
{{- fail (printf "values: gateway.proxy.apiPort and gateway.proxy.streamsPort are both %d: haupt's API and streams need a port each" (int $g.proxy.apiPort)) -}}
{{- end -}}
{{- range $name, $port := merge (dict "gateway.service.targetPort" (int $g.service.targetPort)) $ports -}}
{{- if eq $port (int $g.service.runsTargetPort) -}}
{{- fail (printf "values: gateway.service.runsTargetPort is %d, the same as %s: the runs' listener serves less than the users' and needs a port of its own (set gateway.service.runsTargetPort to a free one, e.g. %d)" $port $name (add (int $g.service.runsTargetPort) 1)) -}}
{{- end -}}
{{- end -}}
{{- if eq (int $g.service.port) (int $g.service.runsPort) -}}
{{- fail (printf "values: gateway.service.runsPort and gateway.service.port are both %d: the Service needs a port for users and another for runs (set gateway.service.runsPort to a free one, e.g. 8003)" (int $g.service.port)) -}}
{{- end -}}
{{- range $i, $e := $g.extraEnv -}}
{{- if has $e.name (list "POLYAXON_SERVICE" "POLYAXON_PROXY_LOCAL_PORT" "POLYAXON_ARCHIVES_ROOT") -}}
{{- fail (printf "values: gateway.extraEnv[%d] sets %s, which the chart sets so that haupt stays behind nginx on the pod's loopback: remove it" $i $e.name) -}}
{{- end -}}
{{- end -}}
{{- end -}}
