package main

// Reading an installed release: status and history.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/backup"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/cnpg"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/facts"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/output"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/release"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/render"
)

func statusCommand() *cli.Command {
	return &cli.Command{
		Name:      "status",
		Usage:     "show the release's newest revision, its state and notes",
		UsageText: "polyaxon-deploy status [-n NS] [--release NAME] [-o table|json|yaml]",
		Flags:     joinFlags(clusterFlags(), outputFlags()),
		Action:    runStatus,
	}
}

func historyCommand() *cli.Command {
	return &cli.Command{
		Name:      "history",
		Usage:     "list the release's revisions",
		UsageText: "polyaxon-deploy history [--max N] [-n NS] [--release NAME] [-o table|json|yaml]",
		Flags: joinFlags(clusterFlags(), outputFlags(), []cli.Flag{
			&cli.IntFlag{Name: flagMax, Value: 0, Usage: "show only the newest N revisions (0: all)", Category: "Release"},
		}),
		Action: runHistory,
	}
}

// statusData is the status payload with a table form: the release, then where its pods run.
type statusData struct {
	*release.Status
	Pods []release.PodPlacement `json:"pods"`
	// What polyaxon-deploy last did to the release (installer/facts); absent when nothing yet.
	LastBackup           *facts.Attempt `json:"lastBackup,omitempty"`
	LastSuccessfulBackup *facts.Attempt `json:"lastSuccessfulBackup,omitempty"`
	LastUpgrade          *facts.Attempt `json:"lastUpgrade,omitempty"`
	// The CloudNativePG Cluster of postgresql.mode=cloudnativepg; absent otherwise.
	Postgres *cnpg.State `json:"postgres,omitempty"`
}

// postgresRows are a CloudNativePG Cluster's lines: its state, then each instance.
func postgresRows(s *cnpg.State) [][]string {
	state := fmt.Sprintf("%s: %d of %d instances ready, primary %s", s.Phase, s.Ready, s.Instances, s.Primary)
	if p := s.Problem(); p != "" {
		state += " (not healthy: " + p + ")"
	}
	rows := [][]string{{"postgres", state}}
	for _, m := range s.Members {
		line := m.Role + " on " + m.Node
		if !m.Ready {
			line += ", not ready"
		}
		switch {
		case m.LagBytes != nil:
			line += fmt.Sprintf(", %s behind the primary (replay lag %s)", output.HumanBytes(*m.LagBytes), m.ReplayLag)
		case m.Role != cnpg.RolePrimary && s.LagUnknown == "":
			line += ", not streaming from the primary"
		}
		rows = append(rows, []string{"postgres " + m.Pod, line})
	}
	if s.LagUnknown != "" {
		rows = append(rows, []string{"postgres lag", "unknown: " + s.LagUnknown})
	}
	return rows
}

// attemptText is one backup or upgrade on a line: when, how it ended, and its size and place.
func attemptText(a *facts.Attempt) string {
	if a == nil {
		return "none recorded"
	}
	s := a.Time.Format(time.RFC3339)
	if !a.Succeeded {
		return s + " failed: " + a.Error
	}
	s += " succeeded"
	if a.Revision > 0 {
		s += fmt.Sprintf(", revision %d", a.Revision)
	}
	if a.Location != "" {
		s += fmt.Sprintf(", %s in %s", output.HumanBytes(a.Bytes), a.Location)
	}
	return s
}

var placementHeader = []string{"POD", "COMPONENT", "NODE", "POOL", "STATE", "RESTARTS"}

func (d statusData) Table() ([]string, [][]string) {
	s := d.Status
	rows := [][]string{
		{"release", s.Name},
		{"namespace", s.Namespace},
		{"revision", strconv.Itoa(s.Revision)},
		{"status", s.Info.Status},
		{"chart", s.Chart + "-" + s.ChartVersion},
		{"polyaxon", s.AppVersion},
		{"profile", s.Profile},
		{"updated", s.Updated.Format(time.RFC3339)},
		{"description", s.Description},
	}
	if s.DeployedRevision > 0 && s.DeployedRevision != s.Revision {
		rows = append(rows, []string{"deployed revision", strconv.Itoa(s.DeployedRevision)})
	}
	if s.Hint != "" {
		rows = append(rows, []string{"hint", s.Hint})
	}
	rows = append(rows, []string{"last backup", attemptText(d.LastBackup)})
	if d.LastBackup != nil && !d.LastBackup.Succeeded {
		rows = append(rows, []string{"last successful backup", attemptText(d.LastSuccessfulBackup)})
	}
	rows = append(rows, []string{"last upgrade", attemptText(d.LastUpgrade)})
	if d.Postgres != nil {
		rows = append(rows, postgresRows(d.Postgres)...)
	}
	if len(d.Pods) > 0 {
		// An empty line ends the two-column block, so the pod table aligns on its own.
		rows = append(rows, []string{}, placementHeader)
		rows = append(rows, release.PlacementRows(d.Pods)...)
	}
	return []string{"FIELD", "VALUE"}, rows
}

func runStatus(c *cli.Context) error {
	if err := noArgs(c, ""); err != nil {
		return err
	}
	return onRelease(c, func(ctx context.Context, rc *release.Client) (*output.Result, error) {
		st, err := rc.Status(ctx)
		if err != nil {
			return nil, err
		}
		status := output.StatusOK
		if st.Pending || st.Info.Status != "deployed" {
			status = output.StatusFailed
		}
		names, err := rc.Names(ctx)
		if err != nil {
			return nil, err
		}
		pods, err := rc.Placement(ctx, names)
		if err != nil {
			return nil, err
		}
		f, _, err := facts.Store{Kube: rc.Kube(), Namespace: rc.Namespace(), Release: rc.Name()}.Read(ctx)
		if err != nil {
			return nil, err
		}
		pg, err := postgresState(ctx, c, rc, names)
		if err != nil {
			return nil, err
		}
		res := output.NewResult("status", status).WithData(statusData{Status: st, Pods: pods, Postgres: pg,
			LastBackup: f.LastBackup, LastSuccessfulBackup: f.LastSuccessfulBackup, LastUpgrade: f.LastUpgrade})
		info := st.Info
		fillRelease(res, &info, st.Profile)
		res.Notes = st.Notes
		if status == output.StatusOK {
			return res, nil
		}
		// Scripts and CI gate on the exit code: a pending or failed release is not "ok".
		msg := fmt.Sprintf("release %s is %s", st.Name, st.Info.Status)
		if st.Hint != "" {
			msg += ": " + st.Hint
		}
		return res, withExit(ExitError, errors.New(msg))
	})
}

// historyData is the history payload with a table form.
type historyData []release.Info

func (h historyData) Table() ([]string, [][]string) {
	rows := [][]string{}
	for _, r := range h {
		rows = append(rows, []string{strconv.Itoa(r.Revision), r.Updated.Format(time.RFC3339), r.Status,
			r.Chart + "-" + r.ChartVersion, r.AppVersion, r.Description})
	}
	return []string{"REVISION", "UPDATED", "STATUS", "CHART", "POLYAXON", "DESCRIPTION"}, rows
}

func runHistory(c *cli.Context) error {
	if err := noArgs(c, ""); err != nil {
		return err
	}
	return onRelease(c, func(ctx context.Context, rc *release.Client) (*output.Result, error) {
		h, err := rc.History(ctx, c.Int(flagMax))
		if err != nil {
			return nil, err
		}
		if len(h) == 0 {
			return nil, fmt.Errorf("release %q in namespace %q: %w", rc.Name(), rc.Namespace(), release.ErrNotInstalled)
		}
		res := output.NewResult("history", output.StatusOK).WithData(historyData(h))
		last := h[len(h)-1]
		fillRelease(res, &last, "")
		return res, nil
	})
}

// postgresState is the release's CloudNativePG Cluster, with each replica's lag read from the
// primary; nil for a StatefulSet's or an external database, or for a user who may not read
// Clusters (status says what it can).
func postgresState(ctx context.Context, c *cli.Context, rc *release.Client, names render.Names) (*cnpg.State, error) {
	ks := kubeSettings(c)
	cfg, err := ks.RESTConfig()
	if err != nil {
		return nil, err
	}
	execer := backup.NewExecer(cfg, rc.Kube())
	exec := func(ctx context.Context, namespace, pod, container string, command []string) (string, error) {
		var out, errOut bytes.Buffer
		ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		if err := execer.Exec(ctx, namespace, pod, container, command, backup.Stdio{Stdout: &out, Stderr: &errOut}); err != nil {
			return "", fmt.Errorf("%w: %s", err, strings.TrimSpace(errOut.String()))
		}
		return out.String(), nil
	}
	pg, err := cnpg.Read(ctx, rc.Kube(), rc.Namespace(), names.Component("postgresql"), exec)
	if errors.Is(err, cnpg.ErrNoCluster) || apierrors.IsForbidden(err) {
		return nil, nil
	}
	return pg, err
}
