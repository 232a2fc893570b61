package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster"
	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster/local"
	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/pgtest"
)

// storeMetric is a metric of an exporter the alerts read (pg_up, redis_up, ...).
var storeMetric = regexp.MustCompile(`\b(?:pg|redis)_[a-z_]+\b`)

// TestExportersReadTheStoresAsTheChartRunsThem: postgres_exporter and redis_exporter, built at
// the chart's tags, run with the arguments and environment the chart gives their containers
// (metrics.enabled) against a real PostgreSQL and a real Redis, with the passwords of the
// stores' Secrets. Each reports its store up and exposes every metric the chart's alerts read
// from it; once the store stops, it reports it down, which PolyaxonPostgresDown and
// PolyaxonRedisDown fire on.
func TestExportersReadTheStoresAsTheChartRunsThem(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t, 5*time.Minute)
	bin, err := cluster.EnsureExporters(ctx, nil)
	require.NoError(t, err)

	var data struct {
		Objects []map[string]any `json:"objects"`
	}
	deploy(t, "render", "--profile", "production", "-n", "polyaxon", "-o", "json",
		"-s", "templates/postgresql/statefulset.yaml", "-s", "templates/redis/statefulset.yaml", "-s", "templates/metrics/prometheusrule.yaml",
		"--set", "redis.enabled=true", "--set", "metrics.enabled=true", "--set", "metrics.prometheusRule.enabled=true").requireExit(t, 0).data(t, &data)
	exporters := map[string]corev1.Container{}
	var read []string // the store metrics the alerts read
	for _, o := range data.Objects {
		u := &unstructured.Unstructured{Object: o}
		switch u.GetKind() {
		case "StatefulSet":
			var sts appsv1.StatefulSet
			require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(o, &sts))
			for _, c := range sts.Spec.Template.Spec.Containers {
				if c.Name == "metrics" {
					exporters[sts.Name] = c
				}
			}
		case "PrometheusRule":
			groups, _, _ := unstructured.NestedSlice(o, "spec", "groups")
			for _, g := range groups {
				for _, r := range g.(map[string]any)["rules"].([]any) {
					read = append(read, storeMetric.FindAllString(r.(map[string]any)["expr"].(string), -1)...)
				}
			}
		}
	}
	slices.Sort(read)
	read = slices.Compact(read)
	require.Contains(t, exporters, "polyaxon-postgresql")
	require.Contains(t, exporters, "polyaxon-redis")
	t.Logf("metrics the alerts read from the exporters: %s", strings.Join(read, ", "))

	t.Run("postgres_exporter", func(t *testing.T) {
		pg := pgtest.New(t)
		c := exporters["polyaxon-postgresql"]
		listen := freeLoopbackPort(t)
		argv := hostArgs(c.Args, map[string]string{"--web.listen-address=:9187": fmt.Sprintf("--web.listen-address=127.0.0.1:%d", listen)})
		env := hostEnv(t, c.Env, map[string]string{"postgres-password": pg.Password()},
			map[string]string{"127.0.0.1:5432": fmt.Sprintf("%s:%d", pg.Host, pg.Port)})
		startExporter(t, filepath.Join(bin, "postgres_exporter"), argv, env)
		url := fmt.Sprintf("http://127.0.0.1:%d/metrics", listen)

		families := scrapeWhen(t, url, "pg_up is 1", func(f map[string]*dto.MetricFamily) bool { return gaugeIs(f, "pg_up", 1) })
		for _, m := range read {
			if strings.HasPrefix(m, "pg_") {
				assert.Contains(t, families, m, "the alerts read %s; the exporter as the chart runs it must expose it", m)
			}
		}
		active := families["pg_stat_activity_count"]
		require.NotNil(t, active)
		assert.Equal(t, "polyaxon", labelOf(active.Metric[0], "datname"), "the exporter logged in to the chart's database")
		maxConn, err := pg.Psql(ctx, "polyaxon", "SHOW max_connections")
		require.NoError(t, err)
		want, err := strconv.ParseFloat(strings.TrimSpace(maxConn), 64)
		require.NoError(t, err)
		assert.True(t, gaugeIs(families, "pg_settings_max_connections", want), "the server's max_connections, %v", want)

		require.NoError(t, pg.Stop(ctx, "fast"))
		scrapeWhen(t, url, "pg_up is 0 once Postgres stops", func(f map[string]*dto.MetricFamily) bool { return gaugeIs(f, "pg_up", 0) })
	})

	t.Run("redis_exporter", func(t *testing.T) {
		c := exporters["polyaxon-redis"]
		password := "a-redis-password"
		redisPort := freeLoopbackPort(t)
		dir := t.TempDir()
		conf := filepath.Join(dir, "redis.conf")
		require.NoError(t, os.WriteFile(conf, fmt.Appendf(nil, "requirepass %s\nport %d\nbind 127.0.0.1\ndir %s\nsave \"\"\n", password, redisPort, dir), 0o600))
		redis := exec.Command("redis-server", conf)
		redis.Stdout, redis.Stderr = nil, nil
		require.NoError(t, redis.Start(), "redis-server (make deps installs it)")
		t.Cleanup(func() { _ = redis.Process.Kill(); _ = redis.Wait() })

		listen := freeLoopbackPort(t)
		env := hostEnv(t, c.Env, map[string]string{"redis-password": password}, map[string]string{
			"redis://127.0.0.1:6379": fmt.Sprintf("redis://127.0.0.1:%d", redisPort),
			":9121":                  fmt.Sprintf("127.0.0.1:%d", listen),
		})
		startExporter(t, filepath.Join(bin, "redis_exporter"), c.Args, env)
		url := fmt.Sprintf("http://127.0.0.1:%d/metrics", listen)

		families := scrapeWhen(t, url, "redis_up is 1", func(f map[string]*dto.MetricFamily) bool { return gaugeIs(f, "redis_up", 1) })
		for _, m := range read {
			if strings.HasPrefix(m, "redis_") {
				assert.Contains(t, families, m, "the alerts read %s; the exporter as the chart runs it must expose it", m)
			}
		}
		assert.Contains(t, families, "redis_connected_clients", "logged in with the Secret's password")

		require.NoError(t, redis.Process.Kill())
		_ = redis.Wait()
		scrapeWhen(t, url, "redis_up is 0 once Redis stops", func(f map[string]*dto.MetricFamily) bool { return gaugeIs(f, "redis_up", 0) })
	})
}

func freeLoopbackPort(t *testing.T) int {
	t.Helper()
	port, err := local.FreeLoopbackPort()
	require.NoError(t, err)
	return port
}

// hostArgs are a container's arguments with whole arguments replaced for this machine.
func hostArgs(args []string, replace map[string]string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = a
		if r, ok := replace[a]; ok {
			out[i] = r
		}
	}
	return out
}

// hostEnv is a container's environment for a process here: secretKeyRef values from secrets
// (by key), each literal value whose text holds a key of rewrite rewritten (addresses).
func hostEnv(t *testing.T, env []corev1.EnvVar, secrets, rewrite map[string]string) []string {
	t.Helper()
	out := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	for _, e := range env {
		v := e.Value
		if e.ValueFrom != nil {
			require.NotNil(t, e.ValueFrom.SecretKeyRef, "%s: only secretKeyRef is expected", e.Name)
			s, ok := secrets[e.ValueFrom.SecretKeyRef.Key]
			require.True(t, ok, "%s reads Secret key %s", e.Name, e.ValueFrom.SecretKeyRef.Key)
			v = s
		}
		for from, to := range rewrite {
			v = strings.ReplaceAll(v, from, to)
		}
		out = append(out, e.Name+"="+v)
	}
	return out
}

func startExporter(t *testing.T, path string, args, env []string) {
	t.Helper()
	cmd := exec.Command(path, args...)
	cmd.Env, cmd.Dir = env, t.TempDir()
	log, err := os.Create(filepath.Join(t.TempDir(), filepath.Base(path)+".log"))
	require.NoError(t, err)
	cmd.Stdout, cmd.Stderr = log, log
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			b, _ := os.ReadFile(log.Name())
			t.Logf("%s:\n%s", filepath.Base(path), lastLines(string(b), 30))
		}
	})
}

// scrapeWhen scrapes url until cond holds for what it parsed, and returns that.
func scrapeWhen(t *testing.T, url, what string, cond func(map[string]*dto.MetricFamily) bool) map[string]*dto.MetricFamily {
	t.Helper()
	var got map[string]*dto.MetricFamily
	waitFor(t, time.Minute, what, func(ctx context.Context) (bool, string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return false, "", err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false, err.Error(), nil
		}
		defer resp.Body.Close()
		parser := expfmt.NewTextParser(model.UTF8Validation)
		f, err := parser.TextToMetricFamilies(resp.Body)
		if err != nil {
			return false, "", fmt.Errorf("parsing %s: %w", url, err)
		}
		got = f
		return cond(f), strconv.Itoa(len(f)) + " metric families", nil
	})
	return got
}

// gaugeIs: the family holds one sample, equal to want.
func gaugeIs(f map[string]*dto.MetricFamily, name string, want float64) bool {
	mf := f[name]
	return mf != nil && len(mf.Metric) == 1 && mf.Metric[0].GetGauge().GetValue() == want
}

func labelOf(m *dto.Metric, name string) string {
	for _, l := range m.Label {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}
