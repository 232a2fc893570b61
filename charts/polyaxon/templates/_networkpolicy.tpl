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

{{/* The gateway's pods: the only platform pods that talk to runs (services, streams). */}}
{{- define "polyaxon.networkPolicy.gatewayPods" -}}
matchLabels:
  {{- include "polyaxon.selectorLabels" (dict "ctx" . "component" "gateway") | nindent 2 }}
  app.kubernetes.io/part-of: polyaxon
{{- end -}}

{{/* The gateway's pods as seen from the runs' namespace: a NetworkPolicy peer. */}}
{{- define "polyaxon.networkPolicy.gatewayPeer" -}}
{{- if include "polyaxon.runs.ownNamespace" . }}
namespaceSelector:
  matchLabels:
    kubernetes.io/metadata.name: {{ .Release.Namespace }}
{{- end }}
podSelector:
  {{- include "polyaxon.networkPolicy.gatewayPods" . | nindent 2 }}
{{- end -}}

{{/*
Peers: every pod but runs', of the namespaces namespaceSelector selects (this namespace when
nil). Two peers, one for pods without the label and one for the rest: Kubernetes counts a pod
without the key as NotIn, a matcher may not (cyclonus's does not). (dict "namespaceSelector" MAP)
*/}}
{{- define "polyaxon.networkPolicy.notRunsPeers" -}}
{{- $peers := list -}}
{{- range $op := list "DoesNotExist" "NotIn" -}}
{{- $expr := dict "key" "app.kubernetes.io/part-of" "operator" $op -}}
{{- if eq $op "NotIn" }}{{ $_ := set $expr "values" (list "polyaxon-runs") }}{{ end -}}
{{- $peer := dict "podSelector" (dict "matchExpressions" (list $expr)) -}}
{{- with $.namespaceSelector }}{{ $_ := set $peer "namespaceSelector" (dict "matchLabels" .) }}{{ end -}}
{{- $peers = append $peers $peer -}}
{{- end -}}
{{- toYaml $peers -}}
{{- end -}}

{{/* Every run pod: Polyaxon sets this label over any the run asks for. */}}
{{- define "polyaxon.networkPolicy.runPods" -}}
matchLabels:
  app.kubernetes.io/part-of: polyaxon-runs
{{- end -}}

{{/*
The pods of distributed runs (the components of the `experiments` category in
files/run-categories.yaml: TF, PyTorch, MPI, Ray, Dask), which talk to each other.
*/}}
{{- define "polyaxon.networkPolicy.distributedRunPods" -}}
{{- $components := list -}}
{{- range (include "polyaxon.runs.categoryFile" . | fromYaml).categories -}}
{{- if eq .name "experiments" }}{{ $components = .components }}{{ end -}}
{{- end -}}
matchLabels:
  app.kubernetes.io/part-of: polyaxon-runs
matchExpressions:
- key: app.kubernetes.io/component
  operator: In
  values: {{ toJson $components }}
{{- end -}}

{{/*
The API server's addresses as CIDRs (JSON list): networkPolicy.runs.apiServerCIDRs, plus, when
the render reaches a cluster, the `kubernetes` Service's cluster IPs and its EndpointSlice's
addresses (a CNI may judge either side of the Service's address translation).
*/}}
{{- define "polyaxon.networkPolicy.apiServerCIDRs" -}}
{{- $out := list -}}
{{- range .Values.networkPolicy.runs.apiServerCIDRs }}{{ $out = append $out . }}{{ end -}}
{{- $ips := list -}}
{{- with lookup "v1" "Service" "default" "kubernetes" -}}
{{- $ips = concat $ips (.spec.clusterIPs | default (list .spec.clusterIP)) -}}
{{- end -}}
{{- with lookup "discovery.k8s.io/v1" "EndpointSlice" "default" "kubernetes" -}}
{{- range .endpoints | default list }}{{ $ips = concat $ips (.addresses | default list) }}{{ end -}}
{{- end -}}
{{- range $ips -}}
{{- if . }}{{ $out = append $out (printf "%s/%s" . (ternary "128" "32" (contains ":" .))) }}{{ end -}}
{{- end -}}
{{- toJson ($out | uniq) -}}
{{- end -}}

{{/* Every TCP and UDP port but 53 (DNS), as NetworkPolicy port ranges (endPort). */}}
{{- define "polyaxon.networkPolicy.portsButDNS" -}}
- {protocol: TCP, port: 1, endPort: 52}
- {protocol: TCP, port: 54, endPort: 65535}
- {protocol: UDP, port: 1, endPort: 52}
- {protocol: UDP, port: 54, endPort: 65535}
{{- end -}}
