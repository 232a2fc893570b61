// Package exporter serves what polyaxon-deploy knows of a release as Prometheus metrics
// (`polyaxon-deploy exporter`, run by the chart as metrics.installer): the last backup and
// upgrade from the release's facts (installer/facts), and whether each run guard of the
// deployed revision is still there and nothing beside them widens access. Every scrape reads
// them afresh, with calls that only read: what `check` finds by its dry-runs (a guard's spec
// changed) stays `check`'s.
package exporter

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/facts"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/guards"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/render"
)

// The guard's labels are guard_*: `namespace` and `name` are the target's own in Prometheus.
var guardLabels = []string{"guard_kind", "guard_namespace", "guard_name"}

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc("polyaxon_deploy_"+name, help, labels, nil)
}

var (
	factsUp = desc("facts_up",
		"1 when the release's facts (ConfigMap <release>-deploy-facts) were read, or there are none yet; 0 when reading them failed.")
	factsSince = desc("facts_since_timestamp_seconds",
		"When polyaxon-deploy first stored a fact of the release (its install): the age of a release never backed up counts from there.")
	backupAttemptTime = desc("backup_last_attempt_timestamp_seconds", "When the last backup (polyaxon-deploy backup, or an upgrade's) ended.")
	backupAttemptOK   = desc("backup_last_attempt_success", "1 when the last backup succeeded (written and verified), 0 when it failed.")
	backupOKTime      = desc("backup_last_success_timestamp_seconds", "When the last successful backup ended.")
	backupOKBytes     = desc("backup_last_success_bytes", "The size of the last successful backup's dump.")
	upgradeTime       = desc("upgrade_last_timestamp_seconds", "When the last upgrade by polyaxon-deploy ended.")
	upgradeOK         = desc("upgrade_last_success", "1 when the last upgrade succeeded, 0 when it failed (the release was rolled back, or left as it was).")
	guardsUp          = desc("guards_up", "1 when every run guard could be read, 0 when reading one failed (the exporter's rights, or the API server).")
	guardsRevision    = desc("guards_revision", "The release's revision whose run guards are compared.")
	guardOK           = desc("guard_ok",
		"1 while a run guard of the deployed revision exists (for the runs' namespace: with the revision's Pod Security labels), 0 once it is deleted or loosened.",
		guardLabels...)
	guardExtra = desc("guard_extra",
		"1 for an object beside the guards that widens access: a NetworkPolicy the revision does not render, or a binding that gives the release's or the runs' accounts a role.",
		guardLabels...)
)

// Collector reads the facts and the guards at each scrape.
type Collector struct {
	Facts  facts.Store
	Guards guards.Client
	// Timeout bounds one scrape's reads.
	Timeout time.Duration
	Log     *slog.Logger
}

// Describe sends the metrics' descriptions.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{factsUp, factsSince, backupAttemptTime, backupAttemptOK, backupOKTime, backupOKBytes,
		upgradeTime, upgradeOK, guardsUp, guardsRevision, guardOK, guardExtra} {
		ch <- d
	}
}

// Collect reads the facts, then the guards they list.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.Timeout)
	defer cancel()
	f, found, err := c.Facts.Read(ctx)
	if err != nil {
		c.Log.Error("reading the release's facts", "err", err)
		ch <- gauge(factsUp, 0)
		return
	}
	ch <- gauge(factsUp, 1)
	if !found {
		return
	}
	ch <- gauge(factsSince, seconds(f.Since))
	if b := f.LastBackup; b != nil {
		ch <- gauge(backupAttemptTime, seconds(b.Time))
		ch <- gauge(backupAttemptOK, one(b.Succeeded))
	}
	if b := f.LastSuccessfulBackup; b != nil {
		ch <- gauge(backupOKTime, seconds(b.Time))
		ch <- gauge(backupOKBytes, float64(b.Bytes))
	}
	if u := f.LastUpgrade; u != nil {
		ch <- gauge(upgradeTime, seconds(u.Time))
		ch <- gauge(upgradeOK, one(u.Succeeded))
	}
	if f.Guards != nil {
		c.collectGuards(ctx, ch, f.Guards)
	}
}

func (c *Collector) collectGuards(ctx context.Context, ch chan<- prometheus.Metric, g *facts.Guards) {
	rev := g.Of()
	ch <- gauge(guardsRevision, float64(g.Revision))
	missing, errMissing := c.Guards.Missing(ctx, rev.Objects)
	gone := map[string]bool{}
	for _, d := range missing {
		gone[key(d.Manifest)] = true
	}
	for _, m := range rev.Objects {
		ch <- gauge(guardOK, one(!gone[key(m)]), m.Kind(), m.Object.GetNamespace(), m.Name())
	}
	extras, errExtra := c.Guards.Extra(ctx, rev)
	for _, x := range extras {
		ch <- gauge(guardExtra, 1, x.Kind, x.Namespace, x.Name)
	}
	if err := errors.Join(errMissing, errExtra); err != nil {
		c.Log.Error("reading the run guards", "err", err)
		ch <- gauge(guardsUp, 0)
		return
	}
	ch <- gauge(guardsUp, 1)
}

func key(m render.Manifest) string {
	return m.Kind() + "/" + m.Object.GetNamespace() + "/" + m.Name()
}

func gauge(d *prometheus.Desc, v float64, labels ...string) prometheus.Metric {
	return prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
}

func seconds(t time.Time) float64 { return float64(t.UnixMilli()) / 1000 }

func one(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// Handler serves the collector's metrics and the process's own on /metrics, and /healthz.
func Handler(c *Collector) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(c, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Timeout: c.Timeout + 5*time.Second}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	return mux
}
