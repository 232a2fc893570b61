package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster/local"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/output"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestUpgradeKeepsServing: an upgrade that changes Polyaxon's version (2.15.1 to the chart's
// appVersion) runs the migration Job and rolls every gateway pod, while a client sends
// requests to Polyaxon's API through the gateway Service without pause, each on a new
// connection, as users and agents do: none fails. Polyaxon's own programs serve (haupt of each
// pod's image tag), the real PostgreSQL behind the Postgres pod. The client must have seen both
// versions answer: the roll happened while it asked.
func TestUpgradeKeepsServing(t *testing.T) {
	sideBySide(t, realPrograms) // a cluster of its own and Polyaxon's programs (package doc)
	ns := nsInstall
	c := polyaxonCluster(t, "keepserving", ns)
	createNamespace(t, c, ns)
	from, to := oldestPolyaxon, installedVersion(t)
	values := []string{"--profile", "production", "--namespace", ns, "--set", c.postgresPasswordValue(),
		"--set", "scheduler.enabled=false", "--set", "redis.enabled=false", "--set", "gateway.replicas=2",
		"--set", "artifactsStore.persistence.sharedVolume.hostPath.path=" + t.TempDir()}
	c.deploy(t, append([]string{"install", "--set", "polyaxon.version=" + from}, values...)...).requireExit(t, 0)
	requireWorkloadsReady(t, c.Clientset, ns, 4*time.Minute)
	addr, err := local.ServiceAddress(c.Cluster, ns, "polyaxon-gateway", 80)
	require.NoError(t, err)
	migrationJobs := jobNames(t, c, ns, "migrations")
	oldGateways := gatewayPods(t, c, ns)
	postgres, err := c.Clientset.CoreV1().Pods(ns).Get(ctxT(t, time.Minute), local.PostgresPod, metav1.GetOptions{})
	require.NoError(t, err)
	require.Len(t, oldGateways, 2, "gateway pods before the upgrade")

	logs := followGatewayLogs(t, c, ns)
	probe := startAPIProbe("http://" + addr + "/api/v1/installation")
	// A few answers of the old version first: the client runs before the upgrade starts.
	waitFor(t, time.Minute, "the API answering the probe at "+from, func(context.Context) (bool, string, error) {
		s := probe.snapshot()
		return s.versions[from] >= 5, s.String(), nil
	})
	start := time.Now()
	t.Logf("%s upgrade to %s starts", start.Format("15:04:05.000"), to)
	res := c.deploy(t, append([]string{"upgrade", "--backup-dir", t.TempDir(), "--set", "polyaxon.version=" + to, "-o", "json"}, values...)...).requireExit(t, 0)
	var d upgradeData
	res.data(t, &d)
	t.Logf("%s upgrade done", time.Now().Format("15:04:05.000"))
	requireWorkloadsReady(t, c.Clientset, ns, 4*time.Minute)
	// Until the new version has answered a while: every old pod is gone by then.
	waitFor(t, 2*time.Minute, "the API answering the probe at "+to, func(context.Context) (bool, string, error) {
		s := probe.snapshot()
		return s.versions[to] >= 20, s.String(), nil
	})
	s := probe.stop()
	t.Logf("requests to %s during the upgrade (%s): %s", addr, time.Since(start).Round(time.Second), s)
	for _, p := range d.Phases {
		t.Logf("upgrade phase %-16s %s %s", p.Phase, p.Status, p.Took)
	}

	t.Run("the upgrade ran the migration Job", func(t *testing.T) {
		i := d.phaseIndex("migrate")
		require.GreaterOrEqualf(t, i, 0, "phase migrate in %+v", d.Phases)
		assert.Equal(t, "ok", d.Phases[i].Status)
		jobs := jobNames(t, c, ns, "migrations")
		require.Lenf(t, jobs, 1, "the release's migration Job: %v", jobs)
		assert.NotContainsf(t, migrationJobs, jobs[0], "the upgrade's migration Job is a new one (the install's: %v)", migrationJobs)
		assert.Regexp(t, `Operations to perform|No migrations to apply`, jobPodLogs(t, c, ns, "migrations"), "haupt %s's migrate ran", to)
	})
	t.Run("every gateway pod was replaced", func(t *testing.T) {
		requireImagesAt(t, c.Clientset, ns, to)
		now := gatewayPods(t, c, ns)
		assert.Len(t, now, 2)
		for name, image := range now {
			assert.NotContainsf(t, oldGateways, name, "gateway pod %s of the install still runs", name)
			assert.Truef(t, strings.HasSuffix(image, ":"+to), "gateway pod %s runs %s", name, image)
		}
	})
	t.Run("the upgrade said how far the roll was while Helm waited, as JSON events with -o json", func(t *testing.T) {
		waiting := regexp.MustCompile(`^waiting for workloads \([0-9]+s of [0-9hms]+\): [0-9]+ of [0-9]+ ready; .*Deployment polyaxon-gateway: `)
		var saidWaiting int
		for _, line := range strings.Split(strings.TrimSpace(res.RawStderr), "\n") {
			var ev output.Event
			require.NoErrorf(t, json.Unmarshal([]byte(line), &ev), "a stderr line of upgrade -o json that is not an event: %q", line)
			require.NotEmpty(t, ev.Kind, line)
			if ev.Kind == "info" && waiting.MatchString(ev.Message) {
				saidWaiting++
			}
		}
		assert.Positive(t, saidWaiting, "no waiting event in:\n%s", res.RawStderr)
	})
	t.Run("the database was not restarted", func(t *testing.T) {
		// The API answers from PostgreSQL: a restart of its pod drops every connection, and the
		// requests in flight fail (the pod template of the chart's StatefulSet must not change
		// with Polyaxon's version).
		now, err := c.Clientset.CoreV1().Pods(ns).Get(ctxT(t, time.Minute), local.PostgresPod, metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equalf(t, postgres.UID, now.UID, "pod %s was replaced by the upgrade to %s; its labels before: %v, after: %v", local.PostgresPod, to, postgres.Labels, now.Labels)
	})
	t.Run("no request failed", func(t *testing.T) {
		assert.Positive(t, s.versions[from], "answers of %s", from)
		assert.Positive(t, s.versions[to], "answers of %s", to)
		assert.GreaterOrEqual(t, s.total, 50, "requests sent")
		if !assert.Zerof(t, s.failed, "failed requests: %d of %d; the first ones:\n%s", s.failed, s.total, strings.Join(s.failures, "\n")) {
			t.Logf("the gateway pods' logs (errors, and what surrounds them):\n%s", logs.errors())
		}
	})
}

// gatewayLogs holds the logs of every gateway pod of the release from its start (followed, so
// the logs of the pods an upgrade deletes are kept).
type gatewayLogs struct {
	mu   sync.Mutex
	pods map[string]*strings.Builder
}

func followGatewayLogs(t *testing.T, c *testCluster, ns string) *gatewayLogs {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	g := &gatewayLogs{pods: map[string]*strings.Builder{}}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			pods, err := c.Clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=gateway"})
			if err == nil {
				for _, p := range pods.Items {
					g.mu.Lock()
					_, seen := g.pods[p.Name]
					if !seen && p.Status.Phase == corev1.PodRunning {
						b := &strings.Builder{}
						g.pods[p.Name] = b
						wg.Add(1)
						go func(name string) {
							defer wg.Done()
							stream, err := c.Clientset.CoreV1().Pods(ns).GetLogs(name, firstContainer(ctx, c.Clientset, ns, name, &corev1.PodLogOptions{Follow: true, Timestamps: true})).Stream(ctx)
							if err != nil {
								g.mu.Lock()
								b.WriteString("logs: " + err.Error() + "\n")
								g.mu.Unlock()
								return
							}
							defer stream.Close()
							buf := make([]byte, 32*1024)
							for {
								n, err := stream.Read(buf)
								g.mu.Lock()
								b.Write(buf[:n])
								g.mu.Unlock()
								if err != nil {
									return
								}
							}
						}(p.Name)
					}
					g.mu.Unlock()
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(func() { cancel(); wg.Wait() })
	return g
}

// errors are the lines of each pod's log that say 500, error or Traceback, with 3 lines
// before and 12 after.
func (g *gatewayLogs) errors() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []string
	for name, b := range g.pods {
		lines := strings.Split(b.String(), "\n")
		last := -1
		for i, l := range lines {
			if !strings.Contains(l, " 500") && !strings.Contains(l, "Error") && !strings.Contains(l, "Traceback") {
				continue
			}
			from := max(i-3, last+1)
			to := min(i+12, len(lines))
			if from < to {
				out = append(out, "--- "+name)
				out = append(out, lines[from:to]...)
				last = to - 1
			}
		}
	}
	return strings.Join(out, "\n")
}

// jobNames are the names of the release's Jobs of a component.
func jobNames(t *testing.T, c *testCluster, ns, component string) []string {
	t.Helper()
	jobs, err := c.Clientset.BatchV1().Jobs(ns).List(ctxT(t, time.Minute), metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=" + component})
	require.NoError(t, err)
	var out []string
	for _, j := range jobs.Items {
		out = append(out, j.Name)
	}
	sort.Strings(out)
	return out
}

// gatewayPods maps the release's running gateway pods to their image.
func gatewayPods(t *testing.T, c *testCluster, ns string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for name, p := range platformPods(t, c, ns) {
		if p.Labels["app.kubernetes.io/component"] == "gateway" && p.DeletionTimestamp == nil {
			out[name] = p.Spec.Containers[0].Image
		}
	}
	return out
}

// apiProbe sends GET url one after another (a new connection each, 10 s each at most, 100 ms
// apart) until stopped, and counts the answers by Polyaxon version and the failures: an error,
// a status other than 200, or a body without a version.
type apiProbe struct {
	mu     sync.Mutex
	st     probeStats
	cancel context.CancelFunc
	done   chan struct{}
}

type probeStats struct {
	total, failed int
	versions      map[string]int
	failures      []string // the first 20
}

func (s probeStats) String() string {
	var vs []string
	for v, n := range s.versions {
		vs = append(vs, fmt.Sprintf("%s: %d", v, n))
	}
	sort.Strings(vs)
	return fmt.Sprintf("%d requests, %d failed; answers by version: %s", s.total, s.failed, strings.Join(vs, ", "))
}

func startAPIProbe(url string) *apiProbe {
	ctx, cancel := context.WithCancel(context.Background())
	p := &apiProbe{st: probeStats{versions: map[string]int{}}, cancel: cancel, done: make(chan struct{})}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	go func() {
		defer close(p.done)
		for ctx.Err() == nil {
			version, err := installationVersion(ctx, client, url)
			if ctx.Err() != nil {
				return // stopped mid-request: not counted
			}
			p.mu.Lock()
			p.st.total++
			if err != nil {
				p.st.failed++
				if len(p.st.failures) < 20 {
					p.st.failures = append(p.st.failures, time.Now().Format("15:04:05.000")+" "+err.Error())
				}
			} else {
				p.st.versions[version]++
			}
			p.mu.Unlock()
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	return p
}

func installationVersion(ctx context.Context, client *http.Client, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s: %.200s", resp.Status, body)
	}
	var inst struct {
		Version string `json:"version"`
	}
	if err := json.Unmarshal(body, &inst); err != nil || inst.Version == "" {
		return "", fmt.Errorf("no version in %.200s", body)
	}
	return inst.Version, nil
}

func (p *apiProbe) snapshot() probeStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.st
	s.versions = map[string]int{}
	for k, v := range p.st.versions {
		s.versions[k] = v
	}
	s.failures = append([]string(nil), p.st.failures...)
	return s
}

func (p *apiProbe) stop() probeStats {
	p.cancel()
	<-p.done
	return p.snapshot()
}
