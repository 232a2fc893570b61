{{/*
An init container that waits until the API answers, for the agent and the operator: both call
the API as they start, and the agent exits ("Agent failed to start: ClientOSError ...") when
it cannot reach it. The gateway listens only once the database is migrated (see
gateway/_start.tpl), so its /healthz/ answering means the API can serve them. It runs the
agent's own image and Python (the operator's image has no Python), reads the API's address from
POLYAXON_HOST, and only waits: it sends nothing but the health request. TLS is not verified for
that request (a private CA is common): it carries no data and no credentials.
(dict "ctx" $ "url" URL): the gateway's URL the waiting component calls.
*/}}
{{- define "polyaxon.agent.waitForAPIScript" -}}
import os, ssl, time, urllib.request
url = os.environ["POLYAXON_HOST"].rstrip("/") + "/healthz/"
insecure = ssl._create_unverified_context()
while True:
    try:
        with urllib.request.urlopen(url, timeout=5, context=insecure) as answer:
            if answer.status == 200:
                print("The API answers at " + url, flush=True)
                break
    except Exception as e:
        print("Waiting for the API at " + url + ": " + str(e), flush=True)
    time.sleep(2)
{{- end -}}

{{- define "polyaxon.agent.waitForAPIContainer" -}}
{{- $c := dict "ctx" .ctx "component" "agent" "values" .ctx.Values.agent "readOnlyRootFilesystem" true }}
- name: wait-for-api
  {{- include "polyaxon.core.container" $c | nindent 2 }}
  command: ["python", "-c", {{ include "polyaxon.agent.waitForAPIScript" . | toJson }}]
  env:
    - name: POLYAXON_HOST
      value: {{ .url | quote }}
{{- end -}}
