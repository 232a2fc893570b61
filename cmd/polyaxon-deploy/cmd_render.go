package main

import (
	"fmt"

	"github.com/urfave/cli/v2"
	"sigs.k8s.io/yaml"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/output"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/redact"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/render"
)

// RenderData is the `render -o json|yaml` payload.
type RenderData struct {
	// Values are the merged values (chart defaults < profile < -f < --set).
	Values map[string]any `json:"values,omitempty"`
	// Objects are the rendered objects in install order (CRDs, objects, hooks).
	Objects []map[string]any `json:"objects,omitempty"`
}

func renderCommand() *cli.Command {
	return &cli.Command{
		Name:      "render",
		Usage:     "print the manifests (or the merged values) for a profile and values; no cluster needed",
		UsageText: "polyaxon-deploy render [--profile P] [-f FILE]... [--set k=v]... [--values-only] [-o table|json|yaml]",
		Description: `Renders the embedded chart (or --chart DIR) offline. The default output is a YAML
stream like 'helm template' (CRDs first, then objects in install order, then hooks).
-o json|yaml prints the common result document with the objects (or values) as data.
Values layering, last wins: chart defaults < profile < each -f in order < --set.`,
		Flags: joinFlags(
			inputFlags(),
			outputFlags(),
			[]cli.Flag{
				&cli.BoolFlag{Name: "values-only", Usage: "print the merged values instead of the manifests"},
				&cli.StringFlag{Name: flagNamespace, Aliases: []string{"n"}, Value: "polyaxon", Usage: "namespace the manifests are rendered for"},
				&cli.StringFlag{Name: flagRelease, Value: defaultRelease, Usage: "release name the manifests are rendered for"},
				&cli.StringFlag{Name: "kube-version", Value: render.DefaultKubeVersion, Usage: "Kubernetes version assumed for .Capabilities"},
				&cli.StringSliceFlag{Name: "show-only", Aliases: []string{"s"}, Usage: "only print the objects of this template (e.g. templates/gateway/deployment.yaml); repeatable"},
				debugLogFlag(),
			},
		),
		Action: runRender,
	}
}

func runRender(c *cli.Context) error {
	if err := noArgs(c, ""); err != nil {
		return err
	}
	p, in, err := startInputsCommand(c)
	if err != nil {
		return err
	}

	if c.Bool("values-only") {
		merged, err := render.MergedValues(in.Chart, in.Values)
		if err != nil {
			return err
		}
		// Values are shown with their secrets masked, like every other result.
		merged = redact.Values(merged)
		if !p.Structured() {
			b, err := yaml.Marshal(merged)
			if err != nil {
				return err
			}
			_, err = stdout(c).Write(b)
			return err
		}
		return p.Print(resultWithWarnings("render", in).WithData(RenderData{Values: merged}))
	}
	// Manifests go out unmasked: their Secrets must keep their values. Everything else in the
	// result is masked at the source (warnings by path).
	p = printerOn(c, rawStdout(c), p.Format())

	opts := releaseOptions(c)
	opts.KubeVersion = c.String("kube-version")
	var manifests []render.Manifest
	notes := ""
	if only := listFlag(c, "show-only"); len(only) > 0 {
		for _, t := range only {
			ms, err := render.RenderTemplate(in.Chart, in.Values, opts, t)
			if err != nil {
				return err
			}
			manifests = append(manifests, ms...)
		}
	} else {
		res, err := render.Render(in.Chart, in.Values, opts)
		if err != nil {
			return err
		}
		manifests, notes = res.All(), res.Notes
	}
	debugf(c, "rendered %d objects from chart %s (%s), profile %s", len(manifests), in.Chart.Metadata.Version, in.ChartSource, in.Profile.Name)
	envOf(c).scrub.Add(render.SecretValues(manifests)...)
	merged, err := render.MergedValues(in.Chart, in.Values)
	if err != nil {
		return err
	}
	offline := render.OfflineSecretsWarning(merged, manifests)
	if offline != "" {
		progress(c).Warn(offline)
	}

	if !p.Structured() {
		w := rawStdout(c)
		for _, m := range manifests {
			if _, err := fmt.Fprintf(w, "---\n# Source: %s\n%s\n", m.Template, trimDoc(m.Content)); err != nil {
				return err
			}
		}
		return nil
	}
	data := RenderData{}
	for _, m := range manifests {
		data.Objects = append(data.Objects, m.Object.Object)
	}
	r := resultWithWarnings("render", in).WithData(data)
	if offline != "" {
		r.Warnings = append(r.Warnings, offline)
		r.Status = output.StatusWarning
	}
	r.Notes = notes
	return p.Print(r)
}

func trimDoc(s string) string {
	for len(s) > 0 && (s[len(s)-1] == '\n' || s[len(s)-1] == ' ') {
		s = s[:len(s)-1]
	}
	for len(s) > 0 && (s[0] == '\n') {
		s = s[1:]
	}
	return s
}
