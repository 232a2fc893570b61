{{/*
The authenticating edge (oauth2-proxy) in front of the gateway. It is deployed when edge.enabled
and something exposes the release (ingress.enabled, httpRoute.enabled): with neither, nothing
outside reaches the platform and there is nothing to stand in front of.
*/}}

{{/* "true" when the edge is deployed and the Ingress/HTTPRoute send users to it. */}}
{{- define "polyaxon.edge.active" -}}
{{- if and .Values.edge.enabled (or .Values.ingress.enabled .Values.httpRoute.enabled) }}true{{ end -}}
{{- end -}}

{{- define "polyaxon.edge.cookieSecretName" -}}
{{- printf "%s-edge" (include "polyaxon.fullname" .) -}}
{{- end -}}

{{/* The edge's image: its own registry, else imageRegistry (a mirror keeps the path), else quay.io. */}}
{{- define "polyaxon.edge.image" -}}
{{- $i := .Values.edge.image -}}
{{- include "polyaxon.image" (dict "ctx" . "image" (dict "registry" ($i.registry | default .Values.imageRegistry | default "quay.io") "repository" $i.repository "tag" $i.tag)) -}}
{{- end -}}

{{/* The issuer's port (JSON number): the URL's own, else 443 for https and 80 for http. */}}
{{- define "polyaxon.edge.issuerPort" -}}
{{- $u := urlParse .Values.edge.oidc.issuerURL -}}
{{- $hostPort := splitList ":" $u.host -}}
{{- if gt (len $hostPort) 1 }}{{ last $hostPort }}{{ else }}{{ ternary "80" "443" (eq $u.scheme "http") }}{{ end -}}
{{- end -}}

{{/*
Render-time checks of the edge's settings, each naming the value and the fix. A way to log in
is required: OIDC (issuer, client id, client Secret, and the e-mail domains or groups let in)
or an htpasswd Secret.
*/}}
{{- define "polyaxon.edge.validate" -}}
{{- $e := .Values.edge -}}
{{- $o := $e.oidc -}}
{{- if not (or $o.issuerURL $o.clientID $o.clientSecret.name $e.htpasswd.secretName) -}}
{{- fail "values: edge.enabled is true (the production profile turns it on) but no way to log in is set: give OIDC (edge.oidc.issuerURL, edge.oidc.clientID, edge.oidc.clientSecret.name, edge.oidc.emailDomains or edge.oidc.allowedGroups), or for a small site an htpasswd Secret (edge.htpasswd.secretName); or set edge.enabled=false and keep the platform behind your own network (see docs/authentication.md)" -}}
{{- end -}}
{{- if or $o.issuerURL $o.clientID $o.clientSecret.name -}}
{{- if not $o.issuerURL -}}
{{- fail "values: edge.oidc.issuerURL is empty while edge.oidc.clientID or edge.oidc.clientSecret.name is set: set it to your identity provider's issuer, e.g. https://accounts.example.com (its /.well-known/openid-configuration must answer)" -}}
{{- end -}}
{{- $u := urlParse (toString $o.issuerURL) -}}
{{- $host := first (splitList ":" $u.host) -}}
{{- $local := or (eq $host "localhost") (eq $host "127.0.0.1") (hasSuffix ".svc" $host) (hasSuffix (printf ".svc.%s" .Values.dns.clusterDomain) $host) -}}
{{- if or (not (regexMatch "^https?://[^/?#\\s]+(/[^?#\\s]*)?$" (toString $o.issuerURL))) (not $host) (hasSuffix "/.well-known/openid-configuration" (toString $o.issuerURL)) -}}
{{- fail (printf "values: edge.oidc.issuerURL %q is not an issuer URL: write the issuer itself, scheme and host with no query, e.g. https://accounts.example.com or https://login.example.com/realms/ml (without /.well-known/openid-configuration)" (toString $o.issuerURL)) -}}
{{- end -}}
{{- if and (eq $u.scheme "http") (not $local) -}}
{{- fail (printf "values: edge.oidc.issuerURL %q is plain http: the edge would fetch the keys that vouch for every login over an unauthenticated connection; use https:// (http:// is accepted only for an in-cluster *.svc or loopback issuer)" (toString $o.issuerURL)) -}}
{{- end -}}
{{- if not $o.clientID -}}
{{- fail "values: edge.oidc.clientID is empty: set it to the client id registered at the issuer (its redirect URL: https://<your host>/oauth2/callback)" -}}
{{- end -}}
{{- if not $o.clientSecret.name -}}
{{- fail "values: edge.oidc.clientSecret.name is empty: create a Secret with the client's secret (kubectl -n <namespace> create secret generic polyaxon-oidc --from-literal=client-secret=...) and name it here" -}}
{{- end -}}
{{- if not (or $o.emailDomains $o.allowedGroups) -}}
{{- fail "values: edge.oidc.emailDomains and edge.oidc.allowedGroups are both empty: say who gets in, e.g. edge.oidc.emailDomains={example.com} or edge.oidc.allowedGroups={ml-team}; [\"*\"] admits every account the issuer knows" -}}
{{- end -}}
{{- range $i, $d := $o.emailDomains -}}
{{- if not (regexMatch "^(\\*|\\.?[A-Za-z0-9]([-A-Za-z0-9.]*[A-Za-z0-9])?)$" (toString $d)) -}}
{{- fail (printf "values: edge.oidc.emailDomains[%d] %q is not an e-mail domain: write the part after @, e.g. example.com (or * for every domain)" $i (toString $d)) -}}
{{- end -}}
{{- end -}}
{{- if $o.redirectURL -}}
{{- if not (regexMatch "^https?://[^/\\s]+/oauth2/callback$" (toString $o.redirectURL)) -}}
{{- fail (printf "values: edge.oidc.redirectURL %q: the edge answers the issuer at /oauth2/callback, e.g. https://polyaxon.example.com/oauth2/callback" (toString $o.redirectURL)) -}}
{{- end -}}
{{- end -}}
{{- include "polyaxon.validate.secretExists" (dict "ctx" . "name" $o.clientSecret.name "at" "edge.oidc.clientSecret.name" "namespaces" (list .Release.Namespace)) -}}
{{- end -}}
{{- with $e.cookie.secret -}}
{{- if not (has (len (toString .)) (list 16 24 32)) -}}
{{- fail (printf "values: edge.cookie.secret is %d characters: oauth2-proxy takes 16, 24 or 32 (an AES key); leave it empty to have one generated and kept" (len (toString .))) -}}
{{- end -}}
{{- end -}}
{{- end -}}
