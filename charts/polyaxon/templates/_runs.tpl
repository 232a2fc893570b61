{{/*
What the agent gives every run: its auxiliary containers and its one scheduling default.
*/}}

{{/*
An auxiliary container as the agent reads it: the image and its tag apart (Polyaxon appends
`imageTag` to `image` itself, so a tag inside `image` would be doubled).
(dict "ctx" $ "name" "init")
*/}}
{{- define "polyaxon.runs.container" -}}
{{- $c := index .ctx.Values.runs .name -}}
{{- $registry := $c.image.registry | default .ctx.Values.imageRegistry -}}
{{- $image := $c.image.repository -}}
{{- if $registry }}{{ $image = printf "%s/%s" (trimSuffix "/" $registry) $c.image.repository }}{{ end -}}
{{- $out := dict "image" $image "imageTag" (toString ($c.image.tag | default (include "polyaxon.version" .ctx))) "imagePullPolicy" .ctx.Values.imagePullPolicy -}}
{{- with $c.resources }}{{ $_ := set $out "resources" . }}{{ end -}}
{{- if hasKey $c "syncInterval" }}{{ $_ := set $out "syncInterval" $c.syncInterval }}{{ end -}}
{{- if hasKey $c "sleepInterval" }}{{ $_ := set $out "sleepInterval" $c.sleepInterval }}{{ end -}}
{{- toJson $out -}}
{{- end -}}

{{/*
POLYAXON_AGENT_DEFAULT_SCHEDULING: Polyaxon 2.15 applies it to its cleanup operations only (haupt
db/managers/agents.py), not to runs: runs are placed by the chart's admission policies. It is the
`jobs` category's, as is every run pod no other category claims.
*/}}
{{- define "polyaxon.runs.defaultScheduling" -}}
{{- $s := include "polyaxon.scheduling.resolve" (dict "ctx" . "category" "jobs") | fromJson -}}
{{- $out := dict -}}
{{- with $s.nodeSelector }}{{ $_ := set $out "nodeSelector" . }}{{ end -}}
{{- with $s.tolerations }}{{ $_ := set $out "tolerations" . }}{{ end -}}
{{- with $s.affinity }}{{ $_ := set $out "affinity" . }}{{ end -}}
{{- with .Values.imagePullSecrets }}{{ $_ := set $out "imagePullSecrets" . }}{{ end -}}
{{- toJson $out -}}
{{- end -}}

{{/* The namespace of run pods: runs.namespace (a template: the production profile's is
"{{ .Release.Namespace }}-runs"), else the release's own. */}}
{{- define "polyaxon.runs.namespace" -}}
{{- tpl (.Values.runs.namespace | default .Release.Namespace) . -}}
{{- end -}}

{{/* Whether runs live in a namespace of their own (nothing of the platform's in it). */}}
{{- define "polyaxon.runs.ownNamespace" -}}
{{- if ne (include "polyaxon.runs.namespace" .) .Release.Namespace }}true{{ end -}}
{{- end -}}

{{- define "polyaxon.runs.categoryFile" -}}
{{- .Files.Get "files/run-categories.yaml" -}}
{{- end -}}

{{/*
Run pods are placed per category (runs.admissionPolicies.enabled) and hardened
(securityContext.enabled) by MutatingAdmissionPolicies, evaluated by the API server itself
(admissionregistration.k8s.io/v1, Kubernetes 1.36 and later). Older clusters get none:
`polyaxon-deploy check` says so.
*/}}
{{- define "polyaxon.runs.mutatingServed" -}}
{{- if .Capabilities.APIVersions.Has "admissionregistration.k8s.io/v1/MutatingAdmissionPolicy" }}true{{ end -}}
{{- end -}}

{{- define "polyaxon.runs.policiesEnabled" -}}
{{- if and .Values.agent.enabled .Values.runs.admissionPolicies.enabled (include "polyaxon.runs.mutatingServed" .) }}true{{ end -}}
{{- end -}}

{{- define "polyaxon.runs.hardened" -}}
{{- if and .Values.agent.enabled .Values.securityContext.enabled (include "polyaxon.runs.mutatingServed" .) }}true{{ end -}}
{{- end -}}

{{/* Cluster-scoped names carry the namespace: (dict "ctx" $ "name" "experiments") */}}
{{- define "polyaxon.runs.policyName" -}}
{{- list .ctx.Release.Namespace (include "polyaxon.fullname" .ctx) "runs" .name | compact | join "-" | trunc 253 -}}
{{- end -}}

{{/*
A value as a CEL literal. Map values are wrapped in dyn() so maps that mix strings, numbers
and nested objects (a toleration, an affinity) type-check as map(string, dyn).
*/}}
{{- define "polyaxon.cel.literal" -}}
{{- $k := kindOf . -}}
{{- if eq $k "map" -}}
{{- $parts := list -}}
{{- range $key, $v := . }}{{ $parts = append $parts (printf "%s: dyn(%s)" (toJson $key) (include "polyaxon.cel.literal" $v)) }}{{ end -}}
{{- printf "{%s}" (join ", " $parts) -}}
{{- else if eq $k "slice" -}}
{{- $parts := list -}}
{{- range . }}{{ $parts = append $parts (include "polyaxon.cel.literal" .) }}{{ end -}}
{{- printf "[%s]" (join ", " $parts) -}}
{{- else if or (eq $k "float64") (eq $k "float32") -}}
{{- if eq (floor .) . }}{{ int64 . }}{{ else }}{{ . }}{{ end -}}
{{- else -}}
{{- toJson . -}}
{{- end -}}
{{- end -}}

{{/*
CEL: is the pod a run of this category? (dict "ctx" $ "category" "experiments")
A run's own category label wins; otherwise the component label Polyaxon sets decides. The
fallback category also takes every run pod no other category claims.
*/}}
{{- define "polyaxon.runs.memberCEL" -}}
{{- $file := include "polyaxon.runs.categoryFile" .ctx | fromYaml -}}
{{- $label := toJson $file.label -}}
{{- $names := list -}}
{{- $mine := list -}}
{{- $claimed := list -}}
{{- range $file.categories -}}
{{- $names = append $names .name -}}
{{- if eq .name $.category }}{{ $mine = .components }}{{ end -}}
{{- $claimed = concat $claimed .components -}}
{{- end -}}
{{- $labels := "object.metadata.?labels.orValue({})" -}}
{{- $component := printf "%s[?\"app.kubernetes.io/component\"].orValue(\"\")" $labels -}}
{{- $marked := printf "%s in %s" $label $labels -}}
{{- $byLabel := printf "%s[%s] == %s" $labels $label (toJson .category) -}}
{{- $byComponent := printf "%s in %s" $component (toJson $mine) -}}
{{- if eq .category $file.fallback -}}
{{- /* Unmarked and unclaimed, or marked with a name that is no category. */ -}}
{{- $byComponent = printf "(%s || !(%s in %s))" $byComponent $component (toJson ($claimed | uniq)) -}}
{{- $byLabel = printf "(%s || !(%s[%s] in %s))" $byLabel $labels $label (toJson $names) -}}
{{- end -}}
{{- printf "%s[?\"app.kubernetes.io/part-of\"].orValue(\"\") == \"polyaxon-runs\" && (%s ? %s : %s)" $labels $marked $byLabel $byComponent -}}
{{- end -}}

{{/*
The runs' restrictions (a ValidatingAdmissionPolicy, admissionregistration.k8s.io/v1 since
Kubernetes 1.30, the chart's kubeVersion floor): for every release with runs, whatever places
them. No value turns them off.
*/}}
{{- define "polyaxon.runs.restrictionsEnabled" -}}
{{- if .Values.agent.enabled }}true{{ end -}}
{{- end -}}

{{/* The service accounts a run pod may use: the runs account Polyaxon gives every run, or
"default" when the chart creates none (Polyaxon then names none). */}}
{{- define "polyaxon.runs.serviceAccounts" -}}
{{- if .Values.runs.serviceAccount.create -}}
{{- toJson (list (include "polyaxon.componentName" (dict "ctx" . "component" "runs"))) -}}
{{- else -}}
{{- toJson (list "default") -}}
{{- end -}}
{{- end -}}

{{/*
What a run pod may reference, by name, in its own namespace (JSON {secrets, configMaps,
claims}): the artifacts store's claim and Secret, the connections' claims, Secrets and
ConfigMaps, the image pull secrets, the namespace's CA bundle (every pod's service account
volume projects it), and what runs.allowed* adds. Nothing else: not a Secret of the platform's
in a shared namespace, not one that appears later in the runs' own.
*/}}
{{- define "polyaxon.runs.allowedRefs" -}}
{{- $s := .Values.artifactsStore -}}
{{- $secrets := concat (.Values.imagePullSecrets | default list) (.Values.runs.allowedSecrets | default list) -}}
{{- $configMaps := concat (list "kube-root-ca.crt") (.Values.runs.allowedConfigMaps | default list) -}}
{{- $claims := .Values.runs.allowedClaims | default list -}}
{{- with $s.secret.name }}{{ $secrets = append $secrets . }}{{ end -}}
{{- with (include "polyaxon.artifactsStore.identity" . | fromJson).configMap }}{{ $configMaps = append $configMaps . }}{{ end -}}
{{- if eq $s.kind "volume_claim" }}{{ $claims = append $claims (include "polyaxon.artifactsStore.claimName" .) }}{{ end -}}
{{- range $c := .Values.connections -}}
{{- with ($c.secret | default dict).name }}{{ $secrets = append $secrets . }}{{ end -}}
{{- with ($c.configMap | default dict).name }}{{ $configMaps = append $configMaps . }}{{ end -}}
{{- if eq (toString $c.kind) "volume_claim" }}{{ with ($c.schema | default dict).volumeClaim }}{{ $claims = append $claims . }}{{ end }}{{ end -}}
{{- end -}}
{{- toJson (dict "secrets" ($secrets | uniq) "configMaps" ($configMaps | uniq) "claims" ($claims | uniq)) -}}
{{- end -}}

{{/*
What keeps a bucket store's keys to Polyaxon's own containers of a run (JSON; {} when the
store is no bucket): the store's Secret, where its keys are mounted as files, the images of
Polyaxon's init container and sidecar as Polyaxon writes them (image:tag), the store's
connection name, its kind and its root (regex-quoted). Polyaxon gives those keys to the init
containers that fetch artifacts and to the sidecar, and keeps the fields a polyaxonfile sets
on them (image, command, env, mounts): the runs' ValidatingAdmissionPolicy lets the keys reach
a container only in the shape Polyaxon itself gives it (polyaxon.runs.specVariables).
*/}}
{{- define "polyaxon.runs.storeGuard" -}}
{{- $s := .Values.artifactsStore -}}
{{- $id := include "polyaxon.artifactsStore.identity" . | fromJson -}}
{{- if and (has $s.kind (list "s3" "gcs" "wasb")) (or $s.secret.name $id) -}}
{{- $init := include "polyaxon.runs.container" (dict "ctx" . "name" "init") | fromJson -}}
{{- $sidecar := include "polyaxon.runs.container" (dict "ctx" . "name" "sidecar") | fromJson -}}
{{- $guard := dict "secret" ($s.secret.name | default "") "mountPath" ($s.secret.mountPath | default "")
    "init" (printf "%s:%s" $init.image $init.imageTag) "sidecar" (printf "%s:%s" $sidecar.image $sidecar.imageTag)
    "name" $s.name "kind" $s.kind "root" (regexQuoteMeta (trimSuffix "/" $s.bucket)) -}}
{{- $seg := `(/\.?[A-Za-z0-9_-][A-Za-z0-9._-]*)*` -}}
{{- $own := printf "/plx-context/artifacts/@RUN@%s" $seg -}}
{{- $mkdir := printf `if \[ ! -d "%s" \]; then mkdir -m 0777 -p %s; fi;` $own $own -}}
{{- $fetch := printf `polyaxon initializer path --connection-name=%s --connection-kind=%s --path-from=%s/@RUN@%s --path-to=%s( --is-file| --check-path| --sync-fw)? ?;` (regexQuoteMeta $guard.name) $guard.kind $guard.root $seg $own -}}
{{- $_ := set $guard "script" (printf "^((%s|%s) ?)+$" $mkdir $fetch) -}}
{{- $_ := set $guard "tensorboard" (printf "^--(context-from=%s|context-to=/plx-context/artifacts|connection-kind=%s|uuids=@RUN@(,@RUN@)*)$" $guard.root $guard.kind) -}}
{{- $_ := set $guard "sidecarArg" "^--(container-id=[a-z0-9]([-a-z0-9]*[a-z0-9])?|sleep-interval=[0-9]+|sync-interval=[0-9]+|monitor-logs|monitor-spec)$" -}}
{{- $env := list "POLYAXON_API_VERSION" "POLYAXON_ARTIFACTS_STORE_NAME" "POLYAXON_AUTHENTICATION_TYPE" "POLYAXON_CONNECTIONS_CATALOG" "POLYAXON_CONTAINER_ID" "POLYAXON_HEADER" "POLYAXON_HEADER_SERVICE" "POLYAXON_HOST" "POLYAXON_IS_MANAGED" "POLYAXON_K8S_NAMESPACE" "POLYAXON_K8S_NODE_NAME" "POLYAXON_K8S_POD_ID" "POLYAXON_RUN_INSTANCE" -}}
{{- /* The ServiceAccount admission plugin mounts the runs account's token in every container. */ -}}
{{- $mounts := compact (list "/plx-context/artifacts" "/var/run/secrets/kubernetes.io/serviceaccount" $guard.mountPath) -}}
{{- $identityEnv := dict -}}
{{- $_ := set $guard "audience" "" -}}
{{- $_ := set $guard "identityVolume" "" -}}
{{- $_ := set $guard "identityMount" "" -}}
{{- if $id -}}
{{- range $e := $id.env }}{{ $env = append $env $e.name }}{{ $_ := set $identityEnv $e.name $e.value }}{{ end -}}
{{- $mounts = append $mounts $id.mountPath -}}
{{- $_ := set $guard "audience" $id.audience -}}
{{- $_ := set $guard "identityVolume" $id.volume -}}
{{- $_ := set $guard "identityMount" $id.mountPath -}}
{{- $_ := set $guard "expirationSeconds" $id.expirationSeconds -}}
{{- end -}}
{{- $_ := set $guard "env" $env -}}
{{- $_ := set $guard "identityEnv" $identityEnv -}}
{{- $_ := set $guard "mounts" $mounts -}}
{{- toJson $guard -}}
{{- else -}}
{}
{{- end -}}
{{- end -}}

{{/* The variables the store's guard and the identity's mutation read (polyaxon.runs.storeGuard). */}}
{{- define "polyaxon.runs.storeVariables" }}
  - name: store
    expression: {{ include "polyaxon.cel.literal" (include "polyaxon.runs.storeGuard" . | fromJson) | quote }}
  - name: ownRun
    expression: 'object.metadata.?labels[?"app.kubernetes.io/instance"].orValue("")'
  {{- $guarded := include "polyaxon.runs.sidecarGuardCommand" . | fromJsonArray }}
  # A pod's sidecar command, once the mutating policy guarded it
  # (polyaxon.runs.sidecarGuardCommand); Polyaxon's objects carry Polyaxon's own.
  - name: sidecarCommands
    expression: {{ include "polyaxon.cel.literal" (ternary (list (list "polyaxon" "sidecar")) (list $guarded) (empty $guarded)) | quote }}
  - name: runPattern
    expression: '{{ .Values.runs.artifactsOfOtherRuns }} ? "[0-9a-f]{32}" : variables.ownRun'
{{- end -}}

{{/* CEL, over volume v: it carries the store's Secret, whole or projected. */}}
{{- define "polyaxon.runs.storeSecretVolumeCEL" -}}
v.?secret.?secretName.orValue("") == variables.store.secret || v.?projected.?sources.orValue([]).exists(p, p.?secret.?name.orValue("") == variables.store.secret)
{{- end -}}

{{/* CEL, over container c of spec s: c holds the store's keys (its Secret, as variables, a
mount or a projection) or its identity (a mounted token for the identity's audience, or a mount
of the volume the mutating policy adds, by its name: Polyaxon's objects do not have it yet). */}}
{{- define "polyaxon.runs.storeHolderCEL" -}}
(variables.store.secret != "" && (c.?envFrom.orValue([]).exists(e, e.?secretRef.?name.orValue("") == variables.store.secret)
            || c.?env.orValue([]).exists(e, e.?valueFrom.?secretKeyRef.?name.orValue("") == variables.store.secret)))
            || c.?volumeMounts.orValue([]).exists(m, s.?volumes.orValue([]).exists(v, v.name == m.name
              && ((variables.store.secret != "" && ({{ include "polyaxon.runs.storeSecretVolumeCEL" . }}))
                || (variables.store.audience != "" && v.?projected.?sources.orValue([]).exists(p, p.?serviceAccountToken.?audience.orValue("") == variables.store.audience)))))
            || (variables.store.audience != "" && c.?volumeMounts.orValue([]).exists(m, m.name == variables.store.identityVolume))
{{- end -}}

{{/* CEL, over container c of spec s: c's fields are what Polyaxon gives a container that may
hold the store's keys or identity, apart from what makes it one of those two
(polyaxon.runs.ownInitCEL, polyaxon.runs.ownSidecarCEL). The identity's variables carry the
chart's values only; each mount is of the volume Polyaxon (or the chart) puts there, whole: a
sidecar whose context is a volume of the run's, or a file of it (subPath), would upload what
that volume holds as the run's outputs. */}}
{{- define "polyaxon.runs.ownShapeCEL" -}}
c.?env.orValue([]).all(e, e.name in variables.store.env
              && (!(e.name in variables.store.identityEnv) || (e.?value.orValue("") == variables.store.identityEnv[e.name] && !e.?valueFrom.hasValue())))
            && c.?envFrom.orValue([]).all(e, variables.store.secret != "" && e.?secretRef.?name.orValue("") == variables.store.secret)
            && c.?volumeMounts.orValue([]).all(m, m.mountPath in variables.store.mounts
              && m.?subPath.orValue("") == "" && m.?subPathExpr.orValue("") == ""
              && s.?volumes.orValue([]).exists(v, v.name == m.name && (
                (m.mountPath == "/plx-context/artifacts" && v.?emptyDir.hasValue())
                || (m.mountPath == "/var/run/secrets/kubernetes.io/serviceaccount" && v.name.startsWith("kube-api-access-"))
                || (variables.store.mountPath != "" && m.mountPath == variables.store.mountPath
                  && ({{ include "polyaxon.runs.storeSecretVolumeCEL" . }}))
                || (variables.store.audience != "" && m.mountPath == variables.store.identityMount && v.name == variables.store.identityVolume))))
            && !c.?lifecycle.hasValue() && !c.?livenessProbe.hasValue() && !c.?readinessProbe.hasValue() && !c.?startupProbe.hasValue() && !c.?workingDir.hasValue()
{{- end -}}

{{/* CEL, over init container c: Polyaxon's own, fetching this run's own artifacts. */}}
{{- define "polyaxon.runs.ownInitCEL" -}}
variables.ownRun.matches("^[0-9a-f]{32}$") && c.name.startsWith("polyaxon-init-") && c.?image.orValue("") == variables.store.init
            && {{ include "polyaxon.runs.ownShapeCEL" . }}
            && ((c.?command.orValue([]) == ["/bin/sh", "-c"] && c.?args.orValue([]).size() == 1
                && c.args[0].matches(variables.store.script.replace("@RUN@", variables.runPattern)))
              || (c.?command.orValue([]) == ["polyaxon", "initializer", "tensorboard"]
                && c.?args.orValue([]).all(a, a.matches(variables.store.tensorboard.replace("@RUN@", variables.runPattern)))))
{{- end -}}

{{/* CEL, over container c: Polyaxon's own sidecar of this run (guarded, in a pod). */}}
{{- define "polyaxon.runs.ownSidecarCEL" -}}
variables.ownRun.matches("^[0-9a-f]{32}$") && c.name == "polyaxon-sidecar" && c.?image.orValue("") == variables.store.sidecar
            && {{ include "polyaxon.runs.ownShapeCEL" . }}
            && c.?env.orValue([]).exists(e, e.name == "POLYAXON_RUN_INSTANCE" && e.?value.orValue("").endsWith(".runs." + variables.ownRun))
            && (c.?command.orValue([]) in variables.sidecarCommands || (object.kind != "Pod" && c.?command.orValue([]) == ["polyaxon", "sidecar"]))
            && c.?args.orValue([]).all(a, a.matches(variables.store.sidecarArg))
{{- end -}}

{{/*
The command the runs' mutating admission policy gives Polyaxon's sidecar (files/sidecar-guard.py
after files/store-guard.py: no link under the run's context is followed, and the sidecar writes
and deletes only in the run's own folder of the store), where the API server serves
MutatingAdmissionPolicy. Whatever the store: a claim's sidecar would copy a link's target (another
run's folder of the same claim) as the run's own output. JSON list; [] when not.
*/}}
{{- define "polyaxon.runs.sidecarGuardCommand" -}}
{{- if and .Values.agent.enabled (include "polyaxon.runs.mutatingServed" .) -}}
{{- $store := printf "# The artifacts store as the chart gives it to the agent (POLYAXON_AGENT_ARTIFACTS_STORE).\n_CHART_STORE = %s\n" (include "polyaxon.artifactsStore.connection" . | toJson) -}}
{{- toJson (list "python" "-c" (printf "%s%s%s" (.Files.Get "files/store-guard.py") $store (.Files.Get "files/sidecar-guard.py"))) -}}
{{- else -}}
[]
{{- end -}}
{{- end -}}

{{/* runs.protectedCategories -> [{name, labels, selector}]: `core` from nodeSelectors.core, a
dependency from its own nodeSelector; a category without labels is left out. */}}
{{- define "polyaxon.runs.protectedSelectors" -}}
{{- $out := list -}}
{{- $selectors := include "polyaxon.scheduling.nodeSelectors" . | fromJson -}}
{{- range $cat := .Values.runs.protectedCategories | default list -}}
{{- $sel := dict -}}
{{- if eq $cat "core" -}}
{{- $sel = index $selectors "core" | default dict -}}
{{- else -}}
{{- $sel = (index $.Values $cat).nodeSelector | default dict -}}
{{- end -}}
{{- if $sel -}}
{{- $text := list }}{{ range $k, $v := $sel }}{{ $text = append $text (printf "%s=%v" $k $v) }}{{ end -}}
{{- $out = append $out (dict "name" $cat "labels" $sel "selector" (join "," $text)) -}}
{{- end -}}
{{- end -}}
{{- toJson $out -}}
{{- end -}}

{{/* The run categories' nodeSelectors ("k=v,...", unique, in category order) that keep their
runs off every protected category's nodes: each sets a label of every protected category to
another value. What a refused run pod may name instead. */}}
{{- define "polyaxon.runs.poolSelectors" -}}
{{- $protected := include "polyaxon.runs.protectedSelectors" . | fromJsonArray -}}
{{- $out := list -}}
{{- range $cat := include "polyaxon.runCategories" . | fromJsonArray -}}
{{- $sel := (include "polyaxon.scheduling.resolve" (dict "ctx" $ "category" $cat) | fromJson).nodeSelector | default dict -}}
{{- $off := true -}}
{{- range $p := $protected -}}
{{- $excluded := false -}}
{{- range $k, $v := $p.labels }}{{ if and (hasKey $sel $k) (ne (toString (index $sel $k)) (toString $v)) }}{{ $excluded = true }}{{ end }}{{ end -}}
{{- if not $excluded }}{{ $off = false }}{{ end -}}
{{- end -}}
{{- if and $sel $off -}}
{{- $text := list }}{{ range $k, $v := $sel }}{{ $text = append $text (printf "%s=%v" $k $v) }}{{ end -}}
{{- $out = append $out (join "," $text) -}}
{{- end -}}
{{- end -}}
{{- toJson ($out | uniq) -}}
{{- end -}}

{{/* The same pools as label maps (polyaxon.runs.poolSelectors), for the policy's confinement. */}}
{{- define "polyaxon.runs.poolLabels" -}}
{{- $out := list -}}
{{- range $text := include "polyaxon.runs.poolSelectors" . | fromJsonArray -}}
{{- $m := dict -}}
{{- range $kv := splitList "," $text }}{{ $p := splitn "=" 2 $kv }}{{ $_ := set $m $p._0 $p._1 }}{{ end -}}
{{- $out = append $out $m -}}
{{- end -}}
{{- toJson $out -}}
{{- end -}}

{{/* Taint keys no run may tolerate: the control plane's, and those the protected categories'
pods tolerate (tolerations.core, a dependency's own tolerations). */}}
{{- define "polyaxon.runs.protectedTaints" -}}
{{- $out := list "node-role.kubernetes.io/control-plane" "node-role.kubernetes.io/master" -}}
{{- range $cat := .Values.runs.protectedCategories | default list -}}
{{- $l := list -}}
{{- if eq $cat "core" }}{{ $l = $.Values.tolerations.core | default list }}{{ else }}{{ $l = (index $.Values $cat).tolerations | default list }}{{ end -}}
{{- range $t := $l }}{{ with $t.key }}{{ $out = append $out . }}{{ end }}{{ end -}}
{{- end -}}
{{- toJson ($out | uniq) -}}
{{- end -}}

{{/*
What a run may reference, and where it may go, judged on `variables.specs`: the pod specs of
the object the policy sees (a pod's own, or every template of a Polyaxon run object). Each
bad* variable lists, per spec that breaks the rule, what it names ("where: what").
*/}}
{{- define "polyaxon.runs.specVariables" -}}
{{- $refs := include "polyaxon.runs.allowedRefs" . | fromJson }}
  - name: secrets
    expression: {{ include "polyaxon.cel.literal" $refs.secrets | quote }}
  - name: configMaps
    expression: {{ include "polyaxon.cel.literal" $refs.configMaps | quote }}
  - name: claims
    expression: {{ include "polyaxon.cel.literal" $refs.claims | quote }}
  # The ServiceAccount admission plugin names "default" when the pod names none.
  - name: serviceAccounts
    expression: {{ include "polyaxon.cel.literal" (include "polyaxon.runs.serviceAccounts" . | fromJsonArray) | quote }}
  - name: priorityClasses
    expression: {{ include "polyaxon.cel.literal" (concat (list "") (.Values.runs.allowedPriorityClasses | default list)) | quote }}
  - name: schedulers
    expression: {{ include "polyaxon.cel.literal" (concat (list "") (.Values.runs.allowedSchedulers | default list)) | quote }}
  - name: badSecrets
    expression: >-
      variables.specs.map(s,
        s.?volumes.orValue([]).filter(v, v.?secret.hasValue() && !(v.secret.?secretName.orValue("") in variables.secrets))
          .map(v, "volume " + v.name + " mounts Secret " + v.secret.?secretName.orValue(""))
        + s.?volumes.orValue([]).filter(v, v.?projected.?sources.orValue([]).exists(p, p.?secret.hasValue() && !(p.secret.?name.orValue("") in variables.secrets)))
          .map(v, "volume " + v.name + " projects Secret " + v.projected.sources.filter(p, p.?secret.hasValue() && !(p.secret.?name.orValue("") in variables.secrets)).map(p, p.secret.?name.orValue("")).join(", "))
        + s.?volumes.orValue([]).filter(v, v.?csi.?nodePublishSecretRef.hasValue() && !(v.csi.nodePublishSecretRef.?name.orValue("") in variables.secrets))
          .map(v, "volume " + v.name + " passes Secret " + v.csi.nodePublishSecretRef.?name.orValue("") + " to its CSI driver")
        + (s.?containers.orValue([]) + s.?initContainers.orValue([])).filter(c, c.?env.orValue([]).exists(e, e.?valueFrom.?secretKeyRef.hasValue() && !(e.valueFrom.secretKeyRef.?name.orValue("") in variables.secrets)))
          .map(c, "container " + c.name + " reads " + c.env.filter(e, e.?valueFrom.?secretKeyRef.hasValue() && !(e.valueFrom.secretKeyRef.?name.orValue("") in variables.secrets)).map(e, e.name + " from Secret " + e.valueFrom.secretKeyRef.?name.orValue("")).join(", "))
        + (s.?containers.orValue([]) + s.?initContainers.orValue([])).filter(c, c.?envFrom.orValue([]).exists(e, e.?secretRef.hasValue() && !(e.secretRef.?name.orValue("") in variables.secrets)))
          .map(c, "container " + c.name + " loads Secret " + c.envFrom.filter(e, e.?secretRef.hasValue() && !(e.secretRef.?name.orValue("") in variables.secrets)).map(e, e.secretRef.?name.orValue("")).join(", "))
        + s.?imagePullSecrets.orValue([]).filter(ps, !(ps.?name.orValue("") in variables.secrets))
          .map(ps, "imagePullSecrets names " + ps.?name.orValue(""))
      ).filter(l, l.size() > 0).map(l, l.join("; "))
  - name: badConfigMaps
    expression: >-
      variables.specs.map(s,
        s.?volumes.orValue([]).filter(v, v.?configMap.hasValue() && !(v.configMap.?name.orValue("") in variables.configMaps))
          .map(v, "volume " + v.name + " mounts ConfigMap " + v.configMap.?name.orValue(""))
        + s.?volumes.orValue([]).filter(v, v.?projected.?sources.orValue([]).exists(p, p.?configMap.hasValue() && !(p.configMap.?name.orValue("") in variables.configMaps)))
          .map(v, "volume " + v.name + " projects ConfigMap " + v.projected.sources.filter(p, p.?configMap.hasValue() && !(p.configMap.?name.orValue("") in variables.configMaps)).map(p, p.configMap.?name.orValue("")).join(", "))
        + (s.?containers.orValue([]) + s.?initContainers.orValue([])).filter(c, c.?env.orValue([]).exists(e, e.?valueFrom.?configMapKeyRef.hasValue() && !(e.valueFrom.configMapKeyRef.?name.orValue("") in variables.configMaps)))
          .map(c, "container " + c.name + " reads " + c.env.filter(e, e.?valueFrom.?configMapKeyRef.hasValue() && !(e.valueFrom.configMapKeyRef.?name.orValue("") in variables.configMaps)).map(e, e.name + " from ConfigMap " + e.valueFrom.configMapKeyRef.?name.orValue("")).join(", "))
        + (s.?containers.orValue([]) + s.?initContainers.orValue([])).filter(c, c.?envFrom.orValue([]).exists(e, e.?configMapRef.hasValue() && !(e.configMapRef.?name.orValue("") in variables.configMaps)))
          .map(c, "container " + c.name + " loads ConfigMap " + c.envFrom.filter(e, e.?configMapRef.hasValue() && !(e.configMapRef.?name.orValue("") in variables.configMaps)).map(e, e.configMapRef.?name.orValue("")).join(", "))
      ).filter(l, l.size() > 0).map(l, l.join("; "))
  - name: badClaims
    expression: >-
      variables.specs.map(s,
        s.?volumes.orValue([]).filter(v, v.?persistentVolumeClaim.hasValue() && !(v.persistentVolumeClaim.?claimName.orValue("") in variables.claims))
          .map(v, "volume " + v.name + " mounts claim " + v.persistentVolumeClaim.?claimName.orValue(""))
      ).filter(l, l.size() > 0).map(l, l.join("; "))
  - name: ephemeral
    expression: >-
      variables.specs.map(s, s.?volumes.orValue([]).filter(v, v.?ephemeral.hasValue()).map(v, v.name))
        .filter(l, l.size() > 0).map(l, l.join(", "))
  - name: nameservers
    expression: 'variables.specs.map(s, s.?dnsConfig.?nameservers.orValue([])).filter(l, l.size() > 0).map(l, l.join(", "))'
  {{- $guard := include "polyaxon.runs.storeGuard" . | fromJson }}
  {{- if $guard.kind }}
  # A bucket store's keys or workload identity (polyaxon.runs.storeGuard) reach only Polyaxon's
  # own containers, in the shape Polyaxon gives them: its init container fetching this run's own
  # artifacts (its image, `/bin/sh -c` with Polyaxon's script, or its tensorboard initializer)
  # and its sidecar (its image and arguments); with Polyaxon's environment variables only, mounts
  # under its context, no probe, hook or working directory. A polyaxonfile keeps its own image,
  # command, env and mounts on those containers, and names the store as a connection of its own
  # container: each of those is refused. Runs are told apart by their uuid only, so fetching
  # another run's artifacts is fetching any project's (runs.artifactsOfOtherRuns).
  {{- include "polyaxon.runs.storeVariables" . }}
  - name: storeLeaks
    expression: >-
      variables.specs.map(s,
        s.?initContainers.orValue([]).filter(c, !c.?restartPolicy.hasValue() && ({{ include "polyaxon.runs.storeHolderCEL" . }}))
          .filter(c, !({{ include "polyaxon.runs.ownInitCEL" . }}))
          .map(c, "init container " + c.name + " (" + c.?image.orValue("") + ")"
            + (c.?image.orValue("") == variables.store.init ? " fetches more than this run's own artifacts, or with a command, variable or mount of the polyaxonfile's" : " is not Polyaxon's init container"))
        {{- /* A native sidecar (an init container restarted Always) is judged as a container: the
        mutating policy makes Polyaxon's guarded sidecar one. */}}
        + (s.?containers.orValue([]) + s.?initContainers.orValue([]).filter(c, c.?restartPolicy.hasValue()))
          .filter(c, {{ include "polyaxon.runs.storeHolderCEL" . }})
          .filter(c, !({{ include "polyaxon.runs.ownSidecarCEL" . }}))
          .map(c, "container " + c.name + " (" + c.?image.orValue("") + ")"
            + (c.?image.orValue("") == variables.store.sidecar ? " runs with a command, variable or mount of the polyaxonfile's" : " is the run's own"))
      ).filter(l, l.size() > 0).map(l, l.join("; "))
  {{- end }}
  # The run pools as label maps: a spec with a nodeSelector or required node affinity of its
  # own (which the placement policies keep, so it gets no category's) must keep its pods to
  # them: its nodeSelector names every label of one, or every required term an In whose values
  # are each a single-label pool's. Keeping off the protected pools is not enough: a node of
  # no pool (the control plane, a system node) is neither.
  - name: poolLabels
    expression: {{ include "polyaxon.cel.literal" (ternary (include "polyaxon.runs.poolLabels" . | fromJsonArray) list (not (empty .Values.runs.protectedCategories))) | quote }}
  - name: unpooled
    expression: >-
      variables.poolLabels.size() == 0 ? [] : variables.specs.filter(s,
        (s.?nodeSelector.orValue({}).size() > 0 || s.?affinity.?nodeAffinity.?requiredDuringSchedulingIgnoredDuringExecution.?nodeSelectorTerms.orValue([]).size() > 0)
        && !variables.poolLabels.exists(p, p.all(k, s.?nodeSelector.orValue({})[?k].orValue("") == p[k]))
        && !(s.?affinity.?nodeAffinity.?requiredDuringSchedulingIgnoredDuringExecution.?nodeSelectorTerms.orValue([]).size() > 0
          && s.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms.all(t, t.?matchExpressions.orValue([]).exists(e,
            e.operator == "In" && e.?values.orValue([]).size() > 0
            && e.values.all(v, variables.poolLabels.exists(p, p.size() == 1 && e.key in p && p[e.key] == v))))))
        .map(s, s.?nodeSelector.orValue({}).map(k, k + "=" + s.nodeSelector[k]).join(","))
  # A toleration with no key tolerates every taint; the control plane's and the protected
  # pools' taints keep runs off their nodes.
  - name: protectedTaints
    expression: {{ include "polyaxon.cel.literal" (include "polyaxon.runs.protectedTaints" . | fromJsonArray) | quote }}
  - name: badTolerations
    expression: >-
      variables.specs.map(s, s.?tolerations.orValue([])
        .filter(t, t.?key.orValue("") == "" || t.key in variables.protectedTaints)
        .map(t, t.?key.orValue("") == "" ? "a toleration with no key (it tolerates every taint)" : "a toleration of " + t.key))
        .filter(l, l.size() > 0).map(l, l.join(", "))
  # dnsPolicy Default resolves with the node's resolv.conf: the node's nameservers, not the
  # cluster's DNS that the runs' NetworkPolicy keeps runs to.
  - name: nodeDNS
    expression: 'variables.specs.map(s, s.?dnsPolicy.orValue("ClusterFirst")).filter(p, p == "Default")'
  # Volumes that bring what runs are not given: an inline CSI volume of a driver not allowed
  # (a secrets-store driver mounts whatever its parameters name), an image volume (any image
  # the node can pull, the platform's included).
  - name: csiDrivers
    expression: {{ include "polyaxon.cel.literal" (.Values.runs.allowedCSIDrivers | default list) | quote }}
  - name: badVolumeKinds
    expression: >-
      variables.specs.map(s,
        s.?volumes.orValue([]).filter(v, v.?csi.hasValue() && !(v.csi.?driver.orValue("") in variables.csiDrivers))
          .map(v, "volume " + v.name + " is an inline CSI volume of driver " + v.csi.?driver.orValue(""))
        + s.?volumes.orValue([]).filter(v, v.?image.hasValue())
          .map(v, "volume " + v.name + " mounts image " + v.image.?reference.orValue(""))
      ).filter(l, l.size() > 0).map(l, l.join("; "))
  # A projected service-account token for another audience (a cloud's workload identity, a
  # vault) or for longer than the kubelet's own (kube-api-access: 3607 s). The store's own
  # workload identity is the one other audience, in the volume the runs' mutating policy adds
  # and as it adds it (a token of the run's own for that audience, laid out as a file of its
  # outputs, is not it); who mounts it is judged by storeLeaks.
  {{- $badToken := printf `p.?serviceAccountToken.hasValue()
            && (p.serviceAccountToken.?audience.orValue("") != "" || p.serviceAccountToken.?expirationSeconds.orValue(3600) > %d)` (int .Values.runs.maxTokenSeconds) }}
  {{- if (include "polyaxon.runs.storeGuard" . | fromJson).audience }}
  {{- $badToken = printf `%s
            && !(v.name == variables.store.identityVolume && p.serviceAccountToken.?path.orValue("") == "token"
              && p.serviceAccountToken.?audience.orValue("") == variables.store.audience
              && p.serviceAccountToken.?expirationSeconds.orValue(3600) <= variables.store.expirationSeconds)` $badToken }}
  {{- end }}
  - name: badTokens
    expression: >-
      variables.specs.map(s,
        s.?volumes.orValue([]).filter(v, v.?projected.?sources.orValue([]).exists(p, {{ $badToken }}))
          .map(v, "volume " + v.name + " projects a token " + v.projected.sources.filter(p, {{ $badToken }})
            .map(p, "for audience " + (p.serviceAccountToken.?audience.orValue("") != "" ? p.serviceAccountToken.audience : "the API server's")
              + ", " + string(p.serviceAccountToken.?expirationSeconds.orValue(3600)) + " s").join(", "))
      ).filter(l, l.size() > 0).map(l, l.join("; "))
  # Annotations that a network plugin or a mesh reads to give a pod another network, address
  # or egress path than the runs' NetworkPolicy allows (Multus, Calico, Istio, Linkerd, Cilium).
  - name: refusedAnnotations
    expression: {{ include "polyaxon.cel.literal" (.Values.runs.refusedAnnotationPrefixes | default list) | quote }}
  - name: badAnnotations
    expression: >-
      variables.metas.map(m, m.?annotations.orValue({}).filter(k, variables.refusedAnnotations.exists(p, k.startsWith(p))))
        .filter(l, l.size() > 0).map(l, l.join(", "))
  - name: badServiceAccounts
    expression: 'variables.specs.map(s, s.?serviceAccountName.orValue("default")).filter(n, !(n in variables.serviceAccounts))'
  - name: nodeNames
    expression: 'variables.specs.map(s, s.?nodeName.orValue("")).filter(n, n != "")'
  # One process namespace for the pod: the run's container would read the files and the
  # environment of Polyaxon's sidecar (/proc/<pid>/root, /proc/<pid>/environ), the store's keys
  # or token among them. Polyaxon never asks for it.
  - name: sharedProcesses
    expression: 'variables.specs.filter(s, s.?shareProcessNamespace.orValue(false))'
  - name: badPriorityClasses
    expression: 'variables.specs.map(s, s.?priorityClassName.orValue("")).filter(n, !(n in variables.priorityClasses))'
  - name: badSchedulers
    expression: 'variables.specs.map(s, s.?schedulerName.orValue("")).filter(n, !(n in variables.schedulers))'
  # id -> data store, for the data stores' ids that are not the platform's (run pods get those
  # by default; a data store that keeps them from its data is reported by the NOTES).
  - name: dataStoreIds
    expression: {{ include "polyaxon.runs.dataStoreIds" . | quote }}
  - name: badIds
    expression: >-
      variables.specs.map(s,
        ([s.?securityContext.?runAsUser.orValue(-1), s.?securityContext.?runAsGroup.orValue(-1), s.?securityContext.?fsGroup.orValue(-1)]
          + s.?securityContext.?supplementalGroups.orValue([]))
          .filter(i, i in variables.dataStoreIds).map(i, "pod id " + string(i) + " (" + variables.dataStoreIds[i] + ")")
        + (s.?containers.orValue([]) + s.?initContainers.orValue([]))
          .filter(c, [c.?securityContext.?runAsUser.orValue(-1), c.?securityContext.?runAsGroup.orValue(-1)].exists(i, i in variables.dataStoreIds))
          .map(c, "container " + c.name + " id " + [c.?securityContext.?runAsUser.orValue(-1), c.?securityContext.?runAsGroup.orValue(-1)]
            .filter(i, i in variables.dataStoreIds).map(i, string(i) + " (" + variables.dataStoreIds[i] + ")").join(", "))
      ).filter(l, l.size() > 0).map(l, l.join("; "))
  {{- $sizes := include "polyaxon.runs.emptyDirSizes" . | fromJson }}
  # emptyDirs above their bound (runs.emptyDir.maxSizeLimit on the node's disk,
  # maxMemorySizeLimit in memory); "" is no bound. The hardening policy gave those without a
  # size one, within the bounds (the render refuses a default above its bound).
  - name: emptyDirMax
    expression: {{ include "polyaxon.cel.literal" (dict "" $sizes.maxDisk "Memory" $sizes.maxMemory) | quote }}
  - name: badEmptyDirs
    expression: >-
      variables.specs.map(s, s.?volumes.orValue([]).filter(v, v.?emptyDir.?sizeLimit.hasValue()
          && v.emptyDir.?medium.orValue("") in variables.emptyDirMax && variables.emptyDirMax[v.emptyDir.?medium.orValue("")] != ""
          && isQuantity(string(v.emptyDir.sizeLimit))
          && quantity(string(v.emptyDir.sizeLimit)).isGreaterThan(quantity(variables.emptyDirMax[v.emptyDir.?medium.orValue("")])))
        .map(v, "volume " + v.name + " asks " + string(v.emptyDir.sizeLimit)
          + (v.emptyDir.?medium.orValue("") == "Memory"
            ? " in memory, above " + variables.emptyDirMax["Memory"] + " (chart value runs.emptyDir.maxMemorySizeLimit)"
            : " of the node's disk, above " + variables.emptyDirMax[""] + " (chart value runs.emptyDir.maxSizeLimit)")))
        .filter(l, l.size() > 0).map(l, l.join("; "))
{{- end -}}

{{/* CEL map literal id -> data store name for polyaxon.runs.specVariables. */}}
{{- define "polyaxon.runs.dataStoreIds" -}}
{{- $taken := include "polyaxon.securityContext.taken" . | fromJsonArray -}}
{{- $ids := dict -}}
{{- range $s := include "polyaxon.dataStores" . | fromJsonArray -}}
{{- range $k := list "user" "group" "fsGroup" -}}
{{- $id := toString (index $s $k | int64) -}}
{{- if not (has $id $taken) }}{{ $_ := set $ids $id $s.name }}{{ end -}}
{{- end -}}
{{- end -}}
{{- $parts := list -}}
{{- range $id, $name := $ids }}{{ $parts = append $parts (printf "%s: %q" $id $name) }}{{ end -}}
{{- printf "{%s}" (join ", " $parts) -}}
{{- end -}}

{{/* The validations over polyaxon.runs.specVariables, each refusal with the fix. */}}
{{- define "polyaxon.runs.specValidations" }}
  - expression: 'variables.badSecrets.size() == 0'
    reason: Forbidden
    messageExpression: >-
      "a run pod may use only the Secrets runs are given ("
      + (variables.secrets.size() > 0 ? variables.secrets.join(", ") : "none") + "): "
      + variables.badSecrets.join("; ")
      + ": remove it from the polyaxonfile, or give runs a connection with that Secret (chart values connections, runs.allowedSecrets)"
  {{- $guard := include "polyaxon.runs.storeGuard" . | fromJson }}
  {{- if $guard.kind }}
  - expression: 'variables.storeLeaks.size() == 0'
    reason: Forbidden
    messageExpression: >-
      "the artifacts store's " + (variables.store.secret != "" ? "keys (Secret " + variables.store.secret + ")" : "workload identity (a token for audience " + variables.store.audience + ")")
      + " reach only Polyaxon's own init container, fetching this run's own artifacts, and its sidecar: "
      + variables.storeLeaks.join("; ")
      + ": remove `connections: [{{ $guard.name }}]`, plugins.mountArtifactsStore and plugins.collectArtifacts: false from the polyaxonfile, and any container, command, env or mount of its own from its `init` of artifacts;"
      + " a run fetches only its own artifacts, since the store tells runs apart by uuid only, not by project (chart value runs.artifactsOfOtherRuns)"
  {{- end }}
  - expression: 'variables.badConfigMaps.size() == 0'
    reason: Forbidden
    messageExpression: >-
      "a run pod may use only the ConfigMaps runs are given (" + variables.configMaps.join(", ") + "): "
      + variables.badConfigMaps.join("; ")
      + ": remove it from the polyaxonfile, or give runs a connection with that ConfigMap (chart values connections, runs.allowedConfigMaps)"
  - expression: 'variables.badClaims.size() == 0'
    reason: Forbidden
    messageExpression: >-
      "a run pod may mount only the claims runs are given ("
      + (variables.claims.size() > 0 ? variables.claims.join(", ") : "none") + "): "
      + variables.badClaims.join("; ")
      + ": use the artifacts store or a volume_claim connection (chart values connections, runs.allowedClaims)"
  - expression: '{{ .Values.runs.allowEphemeralVolumes }} || variables.ephemeral.size() == 0'
    reason: Forbidden
    messageExpression: >-
      "spec.volumes: a run pod may not create a claim of its own (ephemeral volume "
      + variables.ephemeral.join(", ")
      + "): use emptyDir, the artifacts store or a volume_claim connection, or set the chart value runs.allowEphemeralVolumes (runs.quota bounds them)"
  - expression: 'variables.nameservers.size() == 0'
    reason: Forbidden
    messageExpression: >-
      "spec.dnsConfig.nameservers: a run pod resolves names with the cluster's DNS only, not "
      + variables.nameservers.join(", ")
      + ": remove dnsConfig.nameservers (and dnsPolicy: None) from the run's environment"
  - expression: 'variables.badTolerations.size() == 0'
    reason: Forbidden
    messageExpression: >-
      "spec.tolerations: " + variables.badTolerations.join("; ")
      + ": a run pod may tolerate only its own pools' taints, not the control plane's or a protected pool's ("
      + variables.protectedTaints.join(", ") + "): remove it from the run's environment"
  - expression: 'variables.nodeDNS.size() == 0'
    reason: Forbidden
    message: "spec.dnsPolicy: a run pod resolves names with the cluster's DNS only, not the node's (dnsPolicy Default): remove dnsPolicy from the run's environment"
  - expression: 'variables.badVolumeKinds.size() == 0'
    reason: Forbidden
    messageExpression: >-
      "spec.volumes: " + variables.badVolumeKinds.join("; ")
      + ": a run pod may use inline CSI volumes only of the drivers runs are given ("
      + (variables.csiDrivers.size() > 0 ? variables.csiDrivers.join(", ") : "none")
      + ") and no image volume: use the artifacts store or a connection (chart value runs.allowedCSIDrivers)"
  - expression: 'variables.badTokens.size() == 0'
    reason: Forbidden
    messageExpression: >-
      "spec.volumes: " + variables.badTokens.join("; ")
      + ": a run pod may project its ServiceAccount's token only for the API server and for at most {{ int .Values.runs.maxTokenSeconds }} s (chart value runs.maxTokenSeconds)"
  - expression: 'variables.badAnnotations.size() == 0'
    reason: Forbidden
    messageExpression: >-
      "metadata.annotations: " + variables.badAnnotations.join("; ")
      + ": a run pod may not ask a network plugin or a mesh for another network or egress path: remove these annotations from the run's environment (chart value runs.refusedAnnotationPrefixes)"
  - expression: 'variables.badServiceAccounts.size() == 0'
    reason: Forbidden
    messageExpression: >-
      "spec.serviceAccountName: a run pod uses the runs ServiceAccount " + variables.serviceAccounts.join(", ")
      + ", not " + variables.badServiceAccounts.join(", ")
      + ": remove serviceAccountName from the run's environment"
  - expression: 'variables.sharedProcesses.size() == 0'
    reason: Forbidden
    messageExpression: >-
      "spec.shareProcessNamespace: a run pod may not share one process namespace among its containers: the run's own would read what Polyaxon's sidecar holds; remove it"
  - expression: 'variables.nodeNames.size() == 0'
    reason: Forbidden
    messageExpression: >-
      "spec.nodeName: a run pod may not pick its node (" + variables.nodeNames.join(", ")
      + "): remove nodeName from the run's environment; the scheduler places it on its category's nodes"
  - expression: 'variables.badPriorityClasses.size() == 0'
    reason: Forbidden
    messageExpression: >-
      "spec.priorityClassName: " + variables.badPriorityClasses.join(", ")
      + " is not allowed for runs (allowed: " + (variables.priorityClasses.size() > 1 ? variables.priorityClasses.filter(p, p != "").join(", ") : "none")
      + "): remove priorityClassName from the run's environment, or add it to the chart value runs.allowedPriorityClasses"
  - expression: 'variables.badIds.size() == 0'
    reason: Forbidden
    messageExpression: >-
      "spec.securityContext: a run pod may not run with the ids of the platform's data stores ("
      + variables.badIds.join("; ")
      + "): remove runAsUser, runAsGroup, fsGroup and supplementalGroups from the run's environment (runs get the chart's securityContext ids by default)"
  - expression: 'variables.badSchedulers.size() == 0'
    reason: Forbidden
    messageExpression: >-
      "spec.schedulerName: " + variables.badSchedulers.join(", ")
      + " is not allowed for runs (allowed: " + (variables.schedulers.size() > 1 ? variables.schedulers.filter(p, p != "").join(", ") : "none")
      + "): remove schedulerName from the run's environment, or add it to the chart value runs.allowedSchedulers"
  - expression: 'variables.badEmptyDirs.size() == 0'
    reason: Forbidden
    messageExpression: >-
      "spec.volumes: " + variables.badEmptyDirs.join("; ")
      + ": a run's emptyDir may not ask for more: lower its sizeLimit in the run's environment (volumes), or raise that chart value"
{{- end -}}

{{/*
A Kubernetes quantity as a number (float64 text) for comparisons at render time:
(dict "value" "1500m" "at" "runs.limitRange.default.cpu"). The schema has checked its form;
a value that is no quantity still fails here, with its path.
*/}}
{{- define "polyaxon.quantity" -}}
{{- $s := toString .value | trim -}}
{{- $re := "^([+-]?(?:[0-9]+(?:\\.[0-9]*)?|\\.[0-9]+))(.*)$" -}}
{{- if not (regexMatch $re $s) -}}
{{- fail (printf "values: %s: %q is not a quantity (e.g. 500m, 2, 1Gi)" .at $s) -}}
{{- end -}}
{{- $num := float64 (regexReplaceAll $re $s "${1}") -}}
{{- $suffix := regexReplaceAll $re $s "${2}" -}}
{{- $scale := dict "" "1" "n" "1e-9" "u" "1e-6" "m" "1e-3" "k" "1e3" "M" "1e6" "G" "1e9" "T" "1e12" "P" "1e15" "E" "1e18"
    "Ki" "1024" "Mi" "1048576" "Gi" "1073741824" "Ti" "1099511627776" "Pi" "1125899906842624" "Ei" "1152921504606846976" -}}
{{- if hasKey $scale $suffix -}}
{{- mulf $num (float64 (index $scale $suffix)) -}}
{{- else if regexMatch "^[eE][+-]?[0-9]+$" $suffix -}}
{{- float64 (printf "%ve%s" $num (substr 1 (len $suffix) $suffix)) -}}
{{- else -}}
{{- fail (printf "values: %s: %q is not a quantity (e.g. 500m, 2, 1Gi)" .at $s) -}}
{{- end -}}
{{- end -}}

{{/* A quantity as the API server reads it: a whole number without an exponent (YAML and
--set give numbers as floats, which print as 1e+06). */}}
{{- define "polyaxon.quantityText" -}}
{{- if and (kindIs "float64" .) (eq (floor .) .) -}}{{ int64 . }}{{- else -}}{{ toString . }}{{- end -}}
{{- end -}}

{{/*
The runs' ResourceQuota spec.hard (JSON): the totals of runs.quota, each bounding the
requests and the limits, the GPUs, the object counts (count/<key>), then runs.quota.hard over
them key by key, and no LoadBalancer or NodePort Service ever (the render refuses them in
runs.quota.hard above 0: polyaxon.validate.runs).
*/}}
{{- define "polyaxon.runs.quotaHard" -}}
{{- $q := .Values.runs.quota | default dict -}}
{{- $hard := dict -}}
{{- with $q.pods }}{{ $_ := set $hard "pods" (include "polyaxon.quantityText" .) }}{{ end -}}
{{- range $key, $name := dict "cpu" "cpu" "memory" "memory" "ephemeralStorage" "ephemeral-storage" -}}
{{- with index $q $key -}}
{{- $_ := set $hard (printf "requests.%s" $name) (include "polyaxon.quantityText" .) -}}
{{- end -}}
{{- end -}}
{{- range $name, $v := $q.gpus | default dict -}}
{{- if not (kindIs "invalid" $v) }}{{ $_ := set $hard (printf "requests.%s" $name) (include "polyaxon.quantityText" $v) }}{{ end -}}
{{- end -}}
{{- range $name, $v := $q.objects | default dict -}}
{{- if not (kindIs "invalid" $v) }}{{ $_ := set $hard (printf "count/%s" $name) (include "polyaxon.quantityText" $v) }}{{ end -}}
{{- end -}}
{{- range $k, $v := $q.hard | default dict -}}
{{- $_ := set $hard $k (include "polyaxon.quantityText" $v) -}}
{{- end -}}
{{- $_ := set $hard "services.loadbalancers" "0" -}}
{{- $_ := set $hard "services.nodeports" "0" -}}
{{- toJson $hard -}}
{{- end -}}

{{/* Whether the runs' ResourceQuota and LimitRange are rendered: runs in a namespace of their
own (in the release's they would bound the platform). */}}
{{- define "polyaxon.runs.bounded" -}}
{{- if and .Values.agent.enabled (include "polyaxon.runs.ownNamespace" .) }}true{{ end -}}
{{- end -}}

{{/*
The emptyDir sizes (JSON {disk, memory, maxDisk, maxMemory}), each "" when not set: what the
runs' hardening gives an emptyDir without one, and the most one may ask (runs.emptyDir).
*/}}
{{- define "polyaxon.runs.emptyDirSizes" -}}
{{- $e := .Values.runs.emptyDir | default dict -}}
{{- $out := dict -}}
{{- range $k, $key := dict "disk" "sizeLimit" "memory" "memorySizeLimit" "maxDisk" "maxSizeLimit" "maxMemory" "maxMemorySizeLimit" -}}
{{- $v := index $e $key -}}
{{- $_ := set $out $k (ternary "" (include "polyaxon.quantityText" $v) (or (kindIs "invalid" $v) (eq (toString $v) ""))) -}}
{{- end -}}
{{- toJson $out -}}
{{- end -}}
