package charts_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/chart"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// The gateway pod's only way in is nginx (templates/gateway/_proxy.tpl): the Service and the
// probes reach its port, haupt listens on the pod's loopback, and the container that reads the
// artifacts store for streams holds no platform secret.
func TestGatewayProxyIsTheOnlyWayIn(t *testing.T) {
	for what, r := range map[string]rendered{"defaults": render(t), "production": render(t, profileValues(t, "production"))} {
		gw := podsByComponent(t, r)["gateway"].spec
		names := []string{}
		for _, c := range gw.Containers {
			names = append(names, c.Name)
		}
		assert.Equalf(t, []string{"gateway", "streams", "proxy"}, names, "%s: the API first (kubectl's default container)", what)

		svc := r.get("Service", "polyaxon-gateway")
		require.NotNil(t, svc)
		// The users' port and the runs' (the agent's POLYAXON_HOST, which runs inherit).
		ports, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports")
		require.Len(t, ports, 2)
		targets := []any{}
		for _, p := range ports {
			targets = append(targets, p.(map[string]any)["targetPort"])
		}
		assert.Equalf(t, []any{"http", "runs"}, targets, "%s: the Service targets the named ports", what)
		agentHost := r.get("ConfigMap", "polyaxon-agent").Object["data"].(map[string]any)["POLYAXON_HOST"]
		assert.Equalf(t, "http://polyaxon-gateway.polyaxon.svc.cluster.local:8003", agentHost, "%s: the agent, and so every run, calls the runs' port", what)
		for _, c := range gw.Containers {
			for _, p := range c.Ports {
				if c.Name == "proxy" {
					assert.Containsf(t, []string{"http", "runs"}, p.Name, "%s: nginx's ports are the ones the Service targets", what)
				} else {
					assert.NotContainsf(t, []string{"http", "runs"}, p.Name, "%s: container %s must not carry the Service's ports", what, c.Name)
					assert.NotContainsf(t, []int32{8000, 8003}, p.ContainerPort, "%s: container %s", what, c.Name)
				}
			}
			switch c.Name {
			case "gateway", "streams":
				require.GreaterOrEqualf(t, len(c.Args), 2, "%s: %s: HOST PORT", what, c.Name)
				assert.Equalf(t, "127.0.0.1", c.Args[0], "%s: haupt's %s listens on the pod's loopback only", what, c.Name)
				assert.Nilf(t, c.ReadinessProbe, "%s: %s: the pod's readiness is nginx's, through it", what, c.Name)
			case "proxy":
				assert.Equalf(t, []string{"nginx", "-e", "stderr", "-c", "/etc/polyaxon/proxy/nginx.conf"}, c.Command, what)
				require.NotNilf(t, c.ReadinessProbe, "%s: proxy", what)
				assert.Equalf(t, "/healthz/", c.ReadinessProbe.HTTPGet.Path, "%s: Ready when nginx reaches the API", what)
				assert.Emptyf(t, c.Env, "%s: nginx needs no environment", what)
				assert.Emptyf(t, c.EnvFrom, "%s: nginx needs no environment", what)
				require.NotNil(t, c.SecurityContext)
				assert.Truef(t, *c.SecurityContext.ReadOnlyRootFilesystem, "%s: nginx writes only under /tmp", what)
			}
		}
	}
}

// What streams may give away through a link in a run's outputs is its own environment: it
// gets no Secret but the artifacts store's credentials, and reads the store read-only.
func TestStreamsHoldsNoPlatformSecret(t *testing.T) {
	checkStreamsHoldsNoPlatformSecret(t, loadChart(t))
}

func checkStreamsHoldsNoPlatformSecret(t testing.TB, ch *chart.Chart) {
	values := map[string]any{"artifactsStore": map[string]any{"kind": "s3", "bucket": "s3://runs", "secret": map[string]any{"name": "s3-credentials"}}}
	for what, r := range map[string]rendered{"production": renderChart(t, ch, profileValues(t, "production")), "a bucket with credentials": renderChart(t, ch, profileValues(t, "production"), values)} {
		streams := container(t, podsByComponent(t, r)["gateway"].spec.Containers, "streams")
		for _, e := range streams.Env {
			assert.Nilf(t, e.ValueFrom, "%s: streams reads %s from %v", what, e.Name, e.ValueFrom)
		}
		for _, ef := range streams.EnvFrom {
			if ef.SecretRef != nil {
				assert.Equalf(t, "s3-credentials", ef.SecretRef.Name, "%s: the only Secret streams loads is the store's", what)
			}
		}
		for _, m := range streams.VolumeMounts {
			if m.Name == "artifacts-store" {
				assert.Truef(t, m.ReadOnly, "%s: streams reads the store read-only", what)
			}
		}
		env := map[string]string{}
		for _, e := range streams.Env {
			env[e.Name] = e.Value
		}
		assert.Equalf(t, "streams", env["POLYAXON_SERVICE"], what)
		// Links under the store are refused before haupt (and fsspec, aiofiles) is imported, in
		// streams and in the API, which writes uploads and collected logs there.
		gw := podsByComponent(t, r)["gateway"].spec.Containers
		for _, c := range []corev1.Container{streams, container(t, gw, "gateway")} {
			script := pythonScript(t, c)
			guard, haupt := strings.Index(script, "\ninstall_from_env()"), strings.Index(script, "from haupt")
			assert.Truef(t, guard > 0 && haupt > guard, "%s: %s installs its link guard before it imports haupt", what, c.Name)
			assert.NotRegexpf(t, `(?m)^\s*(import|from) (haupt|fsspec|aiofiles|tarfile|clipped)\b`, script[:max(guard, 0)], "%s: %s: nothing that keeps open is imported before the guard", what, c.Name)
		}
	}
	// The API keeps what it needs: the database password, the secret key and the internal token.
	api := container(t, podsByComponent(t, renderChart(t, ch, profileValues(t, "production")))["gateway"].spec.Containers, "gateway")
	refs := map[string]bool{}
	for _, e := range api.Env {
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			refs[e.Name] = true
		}
	}
	for _, k := range []string{"POLYAXON_DB_PASSWORD", "POLYAXON_SECRET_KEY", "POLYAXON_SECRET_INTERNAL_TOKEN"} {
		assert.Truef(t, refs[k], "the API reads %s from its Secret", k)
	}
}

// nginx's configuration refuses every other spelling of a path, and the routes that mint
// tokens or exec rights; reads of the store go to streams.
func TestGatewayProxyConfig(t *testing.T) { checkGatewayProxyConfig(t, loadChart(t)) }

func checkGatewayProxyConfig(t testing.TB, ch *chart.Chart) {
	cm := configMapData(t, renderChart(t, ch, profileValues(t, "production")), "polyaxon-gateway-proxy")
	conf := cm["nginx.conf"]
	for _, want := range []string{
		"listen 8000;",
		"server 127.0.0.1:8001;",
		"server 127.0.0.1:8002;",
		`"~*^[^?]*%(2e|2f|5c|25|00)" 1;`,
		`"~*^[^?]*%(c0|c1|e0%[89]|f0%[89])" 1;`,
		`"~^[^?]*\\\\" 1;`,
		`"~^[^?]*/\.\.?(/|\?|;|$)" 1;`,
		`"~^[^?]*//" 1;`,

		"location /auth-request/ {\n            return 404;",
		"location /k8s/ {\n            return 403;",
		"GET polyaxon_streams;",
		"HEAD polyaxon_streams;",
		"default polyaxon_api;",
		"location /tmp/plx/archives/ {\n            internal;",
		"disable_symlinks on;",
		"proxy_set_header Host $http_host;",
		"location /streams/ {\n            auth_request /_polyaxon/run-of-project;",
		`"~^/streams/v1/[^/?]+/[^/?]+/[^/?]+/runs/multi(/|\?|$)" "";`,
		"/api/v1/$polyaxon_owner/$polyaxon_project/runs/$polyaxon_run/;",
		"error_page 404 = @polyaxon_not_the_projects;",
	} {
		assert.Contains(t, conf, want)
	}
	assert.Equal(t, 1, strings.Count(conf, "auth_request "), "haupt's own auth request is not asked: only the project of a run's route is")
	assert.Equal(t, 2, strings.Count(conf, "if ($polyaxon_refused_path) {\n            return 400;"), "both ports refuse other spellings of a path")

	// The runs' port (the agent's POLYAXON_HOST, which runs inherit) serves the API and the
	// agent's two calls, and refuses the rest: streams would serve any project's files.
	_, runs, found := strings.Cut(conf, "# Runs' port")
	require.True(t, found, "nginx has a server for runs")
	for _, want := range []string{
		"listen 8003;",
		"location /api/ {\n            proxy_pass http://polyaxon_api;",
		"location = /healthz/ {",
		"location ~ ^/streams/v1/[^/?]+/[^/?]+/agents/[^/?]+/connections_check/?$ {\n            limit_except POST {",
		"location ~ ^/internal/v1/[^/?]+/[^/?]+/agents/[^/?]+/collect/?$ {\n            limit_except POST {",
		"location / {\n            default_type text/plain;\n            return 403 ",
	} {
		assert.Contains(t, runs, want)
	}
	assert.Equal(t, 4, strings.Count(runs, "proxy_pass "), "the runs' port passes on the API, healthz and the agent's two calls, nothing else")
	assert.NotContains(t, runs, "location /streams/")
	others := configMapData(t, renderChart(t, ch, profileValues(t, "production"), map[string]any{"runs": map[string]any{"artifactsOfOtherRuns": true}}), "polyaxon-gateway-proxy")["nginx.conf"]
	_, runs, _ = strings.Cut(others, "# Runs' port")
	assert.Contains(t, runs, "location /streams/ {\n            auth_request /_polyaxon/run-of-project;", "runs.artifactsOfOtherRuns: runs read streams, checked as users' reads")
	for _, unwanted := range []string{"/auth-request/v1", "/services/v1", "resolver"} {
		assert.NotContains(t, conf, unwanted)
	}

	ssl := configMapData(t, renderChart(t, ch, profileValues(t, "production"), map[string]any{"ssl": map[string]any{"enabled": true, "secretName": "gateway-tls"}}), "polyaxon-gateway-proxy")
	for _, port := range []string{"8000", "8003"} {
		assert.Contains(t, ssl["nginx.conf"], "listen "+port+" ssl;\n        ssl_certificate /etc/ssl/polyaxon/tls.crt;\n        ssl_certificate_key /etc/ssl/polyaxon/tls.key;")
	}
}

// A value that would point the Service at haupt, or move haupt off the loopback, is refused at
// render, naming the value.
func TestGatewayProxyValuesRefused(t *testing.T) {
	cases := map[string]struct {
		values map[string]any
		want   string
	}{
		"the API on nginx's port": {map[string]any{"gateway": map[string]any{"proxy": map[string]any{"apiPort": 8000}}},
			"gateway.proxy.apiPort is 8000, the same as gateway.service.targetPort"},
		"streams on nginx's port": {map[string]any{"gateway": map[string]any{"service": map[string]any{"targetPort": 8002}}},
			"gateway.proxy.streamsPort is 8002, the same as gateway.service.targetPort"},
		"the API and streams on one port": {map[string]any{"gateway": map[string]any{"proxy": map[string]any{"streamsPort": 8001}}},
			"gateway.proxy.apiPort and gateway.proxy.streamsPort are both 8001"},
		"haupt's service changed": {map[string]any{"gateway": map[string]any{"extraEnv": []any{map[string]any{"name": "POLYAXON_SERVICE", "value": "api"}}}},
			"gateway.extraEnv[0] sets POLYAXON_SERVICE"},
		"haupt's local port changed": {map[string]any{"gateway": map[string]any{"extraEnv": []any{map[string]any{"name": "A", "value": "b"}, map[string]any{"name": "POLYAXON_PROXY_LOCAL_PORT", "value": "8000"}}}},
			"gateway.extraEnv[1] sets POLYAXON_PROXY_LOCAL_PORT"},
		"runs on nginx's users' port": {map[string]any{"gateway": map[string]any{"service": map[string]any{"runsTargetPort": 8000}}},
			"gateway.service.runsTargetPort is 8000, the same as gateway.service.targetPort"},
		"runs on haupt's streams port": {map[string]any{"gateway": map[string]any{"service": map[string]any{"runsTargetPort": 8002}}},
			"gateway.service.runsTargetPort is 8002, the same as gateway.proxy.streamsPort"},
		"runs on the users' Service port": {map[string]any{"gateway": map[string]any{"service": map[string]any{"runsPort": 80}}},
			"gateway.service.runsPort and gateway.service.port are both 80"},
		"a body size nginx does not read": {map[string]any{"gateway": map[string]any{"proxy": map[string]any{"maxBodySize": "4 GB"}}},
			"maxBodySize"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := renderWith(loadChart(t), mergeValues(profileValues(t, "production"), tc.values), false, nil)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

// configMapData is the data of ConfigMap name in r.
func configMapData(t testing.TB, r rendered, name string) map[string]string {
	t.Helper()
	o := r.get("ConfigMap", name)
	require.NotNil(t, o, "ConfigMap %s", name)
	var cm corev1.ConfigMap
	decodeStrict(t, o, &cm)
	return cm.Data
}
