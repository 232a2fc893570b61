{{/*
The alerts (a Prometheus rules file's `groups`), one per thing a platform team must know; each
says what it read and what to do. docs/metrics.md lists them; charts/testdata/alerts holds a
`promtool test rules` case for each. Metrics: the exporters of this release (job = the metrics
Service's name), kube-state-metrics (kube_*) and the kubelet (kubelet_volume_*).
*/}}
{{- define "polyaxon.metrics.rules" -}}
{{- $ns := .Release.Namespace -}}
{{- $runs := include "polyaxon.runs.namespace" . -}}
{{- $r := .Values.metrics.prometheusRule -}}
{{- $ports := include "polyaxon.metrics.ports" . | fromJson -}}
{{- $job := dict -}}
{{- range $component, $_ := $ports }}{{ $_ := set $job $component (include "polyaxon.metrics.serviceName" (dict "ctx" $ "component" $component)) }}{{ end -}}
{{- $gateway := include "polyaxon.componentName" (dict "ctx" . "component" "gateway") -}}
{{- $agent := include "polyaxon.componentName" (dict "ctx" . "component" "agent") -}}
{{- $release := dict "release" .Release.Name "namespace" $ns -}}
groups:
- name: {{ printf "polyaxon.%s.%s" $ns .Release.Name }}
  rules:
  - alert: PolyaxonAPIUnavailable
    expr: {{ printf "kube_deployment_status_replicas_available{namespace=%q, deployment=%q} < 1" $ns $gateway | quote }}
    for: 2m
    labels: {{ merge (dict "severity" "critical") $release | toJson }}
    annotations:
      summary: {{ printf "Polyaxon's API (%s/%s) has no ready gateway pod" $ns $gateway | quote }}
      description: {{ printf "No pod of Deployment %s/%s is ready for 2 minutes: its readiness probe asks the API's /healthz/ through nginx, so the API is down or answering errors, and users and runs cannot reach it. See `polyaxon-deploy status -n %s` and `kubectl -n %s describe deployment %s`." $ns $gateway $ns $ns $gateway | quote }}
  {{- if .Values.agent.enabled }}
  - alert: PolyaxonAgentUnavailable
    expr: {{ printf "kube_deployment_status_replicas_available{namespace=%q, deployment=%q} < 1" $ns $agent | quote }}
    for: 5m
    labels: {{ merge (dict "severity" "critical") $release | toJson }}
    annotations:
      summary: {{ printf "Polyaxon's agent (%s/%s) is not running" $ns $agent | quote }}
      description: {{ printf "No pod of Deployment %s/%s is ready for 5 minutes: no new run starts and no run's status moves. See `kubectl -n %s logs deployment/%s`." $ns $agent $ns $agent | quote }}
  {{- end }}
  - alert: PolyaxonKubeStateMetricsMissing
    expr: {{ printf "absent(kube_deployment_status_replicas_available{namespace=%q, deployment=%q})" $ns $gateway | quote }}
    for: 15m
    labels: {{ merge (dict "severity" "warning") $release | toJson }}
    annotations:
      summary: "kube-state-metrics reports nothing of Polyaxon's gateway"
      description: {{ printf "Prometheus has no kube_deployment_status_replicas_available for %s/%s: the alerts on the API, the agent and stuck run pods cannot fire. Install kube-state-metrics (kube-prometheus-stack ships it) and let this Prometheus scrape it." $ns $gateway | quote }}
  {{- with $job.operator }}
  - alert: PolyaxonOperatorDown
    expr: {{ printf "absent(up{namespace=%q, job=%q} == 1)" $ns . | quote }}
    for: 5m
    labels: {{ merge (dict "severity" "critical") $release | toJson }}
    annotations:
      summary: {{ printf "Polyaxon's operator (%s) answers no scrape" $ns | quote }}
      description: {{ printf "No target of job %s has been up for 5 minutes: the operator is down or its metrics port unreachable, and runs' objects are not turned into pods. See `kubectl -n %s logs deployment/%s`." . $ns (include "polyaxon.componentName" (dict "ctx" $ "component" "operator")) | quote }}
  {{- end }}
  {{- with $job.postgresql }}
  - alert: PolyaxonPostgresDown
    expr: {{ printf "absent(pg_up{namespace=%q, job=%q} == 1)" $ns . | quote }}
    for: 1m
    labels: {{ merge (dict "severity" "critical") $release | toJson }}
    annotations:
      summary: {{ printf "Polyaxon's Postgres (%s) is down" $ns | quote }}
      description: {{ printf "For a minute the exporter beside Postgres has reported pg_up 0, or no such exporter has answered (the pod is gone): the API cannot read or write. See `kubectl -n %s describe statefulset %s` and its logs." $ns (include "polyaxon.componentName" (dict "ctx" $ "component" "postgresql")) | quote }}
  - alert: PolyaxonPostgresConnectionsNearLimit
    expr: {{ printf "sum(pg_stat_activity_count{namespace=%q, job=%q}) / max(pg_settings_max_connections{namespace=%q, job=%q}) > %v" $ns . $ns . $r.connectionsRatio | quote }}
    for: 5m
    labels: {{ merge (dict "severity" "warning") $release | toJson }}
    annotations:
      summary: {{ printf "Polyaxon's Postgres (%s) uses most of its connections" $ns | quote }}
      description: {{ printf "More than %.0f%% of max_connections have been in use for 5 minutes (now {{ $value | humanizePercentage }}): new API requests will soon be refused. Fewer API workers, or a larger max_connections." (mulf $r.connectionsRatio 100) | quote }}
  - alert: PolyaxonPostgresReplicationLag
    expr: {{ printf "max(pg_replication_lag_seconds{namespace=%q, job=%q}) > %v" $ns . $r.replicationLagSeconds | quote }}
    for: 2m
    labels: {{ merge (dict "severity" "warning") $release | toJson }}
    annotations:
      summary: {{ printf "A replica of Polyaxon's Postgres (%s) lags behind" $ns | quote }}
      description: {{ printf "A replica has been more than %vs behind its primary for 2 minutes (now {{ $value | humanizeDuration }}): a failover now would lose what it has not replayed." $r.replicationLagSeconds | quote }}
  {{- end }}
  {{- with $job.redis }}
  - alert: PolyaxonRedisDown
    expr: {{ printf "absent(redis_up{namespace=%q, job=%q} == 1)" $ns . | quote }}
    for: 2m
    labels: {{ merge (dict "severity" "critical") $release | toJson }}
    annotations:
      summary: {{ printf "Polyaxon's Redis (%s) is down" $ns | quote }}
      description: {{ printf "For 2 minutes the exporter beside Redis has reported redis_up 0, or no such exporter has answered (the pod is gone). See `kubectl -n %s describe statefulset %s`." $ns (include "polyaxon.componentName" (dict "ctx" $ "component" "redis")) | quote }}
  {{- end }}
  {{- with index $job "installer-exporter" }}
  {{- $sel := printf "namespace=%q, job=%q" $ns . }}
  - alert: PolyaxonInstallerExporterDown
    expr: {{ printf "absent(up{%s} == 1)" $sel | quote }}
    for: 10m
    labels: {{ merge (dict "severity" "warning") $release | toJson }}
    annotations:
      summary: {{ printf "polyaxon-deploy's exporter (%s) answers no scrape" $ns | quote }}
      description: {{ printf "No target of job %s has been up for 10 minutes: the alerts on backups and run guards cannot fire. See `kubectl -n %s logs deployment/%s`." . $ns (include "polyaxon.componentName" (dict "ctx" $ "component" "installer-exporter")) | quote }}
  - alert: PolyaxonGuardMissing
    expr: {{ printf "polyaxon_deploy_guard_ok{%s} == 0" $sel | quote }}
    for: 1m
    labels: {{ merge (dict "severity" "critical") $release | toJson }}
    annotations:
      summary: {{ "Run guard {{ $labels.guard_kind }} {{ with $labels.guard_namespace }}{{ . }}/{{ end }}{{ $labels.guard_name }} is gone or loosened" | quote }}
      description: {{ printf "A guard that keeps runs away from the platform (Pod Security labels, an admission policy or its binding, a NetworkPolicy, RBAC, the runs' quota) has been deleted or loosened for a minute, and the API server says nothing of it: runs may now get what it refused. See `polyaxon-deploy check -n %s`; `polyaxon-deploy recover -n %s` puts it back." $ns $ns | quote }}
  - alert: PolyaxonGuardWidened
    expr: {{ printf "polyaxon_deploy_guard_extra{%s} == 1" $sel | quote }}
    for: 1m
    labels: {{ merge (dict "severity" "critical") $release | toJson }}
    annotations:
      summary: {{ "{{ $labels.guard_kind }} {{ with $labels.guard_namespace }}{{ . }}/{{ end }}{{ $labels.guard_name }} widens what the run guards allow" | quote }}
      description: {{ printf "An object the release does not render (a NetworkPolicy beside the release's or the runs', or a binding that gives the runs' or the release's accounts a role) has stood for a minute: NetworkPolicies add up, so what it allows is allowed. See `polyaxon-deploy check -n %s`, and delete it unless something of yours needs it." $ns | quote }}
  - alert: PolyaxonBackupFailed
    expr: {{ printf "polyaxon_deploy_backup_last_attempt_success{%s} == 0" $sel | quote }}
    labels: {{ merge (dict "severity" "warning") $release | toJson }}
    annotations:
      summary: {{ printf "The last backup of Polyaxon's database (%s) failed" $ns | quote }}
      description: {{ printf "polyaxon-deploy's last backup (a `backup`, or the one before an upgrade) did not end written and verified. `polyaxon-deploy status -n %s` shows its error; the alert clears with the next successful backup." $ns | quote }}
  {{- with $r.backupMaxAgeHours }}
  - alert: PolyaxonBackupTooOld
    expr: {{ printf "time() - max(polyaxon_deploy_backup_last_success_timestamp_seconds{%s} or polyaxon_deploy_facts_since_timestamp_seconds{%s}) > %d" $sel $sel (mul . 3600) | quote }}
    for: 10m
    labels: {{ merge (dict "severity" "warning") $release | toJson }}
    annotations:
      summary: {{ printf "Polyaxon's database (%s) has no backup of the last %d hours" $ns (int .) | quote }}
      description: {{ printf "The last successful backup by polyaxon-deploy is {{ $value | humanizeDuration }} old (never backed up: that long since its install), more than %d hours: a lost volume now loses that much. Run `polyaxon-deploy backup -n %s`." (int .) $ns | quote }}
  {{- end }}
  - alert: PolyaxonUpgradeFailed
    expr: {{ printf "polyaxon_deploy_upgrade_last_success{%s} == 0" $sel | quote }}
    labels: {{ merge (dict "severity" "warning") $release | toJson }}
    annotations:
      summary: {{ printf "The last upgrade of Polyaxon (%s) failed" $ns | quote }}
      description: {{ printf "polyaxon-deploy's last upgrade did not complete: the previous revision serves (see `polyaxon-deploy status -n %s` and `history`). The alert clears with the next successful upgrade." $ns | quote }}
  {{- end }}
  - alert: PolyaxonVolumeNearlyFull
    expr: {{ printf "kubelet_volume_stats_available_bytes{namespace=%q} / kubelet_volume_stats_capacity_bytes{namespace=%q} < %v" $ns $ns $r.volumeFreeRatio | quote }}
    for: 5m
    labels: {{ dict "severity" "warning" "release" .Release.Name | toJson }}
    annotations:
      summary: {{ printf "Claim {{ $labels.persistentvolumeclaim }} of Polyaxon (%s) is nearly full" $ns | quote }}
      description: {{ printf "Less than %.0f%% of claim {{ $labels.persistentvolumeclaim }} has been free for 5 minutes (now {{ $value | humanizePercentage }}): Postgres stops writing when its disk is full. Grow the claim (a StorageClass with allowVolumeExpansion), or free space." (mulf $r.volumeFreeRatio 100) | quote }}
  - alert: PolyaxonPodStuckPending
    expr: {{ printf "max by (namespace, pod) (kube_pod_status_phase{namespace=~%q, phase=\"Pending\"}) == 1" (printf "%s|%s" $ns $runs | splitList "|" | uniq | join "|") | quote }}
    for: {{ $r.runPendingFor }}
    labels: {{ dict "severity" "warning" "release" .Release.Name | toJson }}
    annotations:
      summary: {{ printf "Pod {{ $labels.namespace }}/{{ $labels.pod }} has been Pending for %s" $r.runPendingFor | quote }}
      description: {{ printf "It has not been placed on a node, or its images or volumes are not ready, for %s: a run stays queued, or a platform pod does not start. See `kubectl -n {{ $labels.namespace }} describe pod {{ $labels.pod }}` (its events say why)." $r.runPendingFor | quote }}
{{- end -}}
