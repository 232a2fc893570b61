package main

import (
	"fmt"

	"github.com/urfave/cli/v2"
	"sigs.k8s.io/yaml"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/action"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/output"
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
	p, err := printer(c)
	if err != nil {
		return err
	}
	opts := releaseOptions(c)
	opts.KubeVersion = c.String("kube-version")
	a := &action.Render{Env: actionEnv(c), Given: givenOf(c, true), Render: opts, ShowOnly: listFlag(c, "show-only"), ValuesOnly: c.Bool("values-only")}
	res, err := a.Run(c.Context)
	if err != nil {
		return usageExit(err)
	}
	in := res.Inputs
	if a.ValuesOnly {
		return printValues(c, p, in, res.Values)
	}
	// Manifests go out unmasked: their Secrets must keep their values. Everything else in the
	// result is masked at the source (warnings by path).
	return printManifests(c, printerOn(c, rawStdout(c), p.Format()), in, res)
}

// printValues prints the merged values: YAML, or the result with them as data.
func printValues(c *cli.Context, p *output.Printer, in *action.Inputs, vals map[string]any) error {
	if p.Structured() {
		return p.Print(resultWithWarnings("render", in).WithData(RenderData{Values: vals}))
	}
	b, err := yaml.Marshal(vals)
	if err != nil {
		return err
	}
	_, err = stdout(c).Write(b)
	return err
}

// printManifests prints a YAML stream like 'helm template', or the result with the objects as
// data.
func printManifests(c *cli.Context, p *output.Printer, in *action.Inputs, res *action.RenderResult) error {
	if !p.Structured() {
		w := rawStdout(c)
		for _, m := range res.Manifests {
			if _, err := fmt.Fprintf(w, "---\n# Source: %s\n%s\n", m.Template, trimDoc(m.Content)); err != nil {
				return err
			}
		}
		return nil
	}
	data := RenderData{}
	for _, m := range res.Manifests {
		data.Objects = append(data.Objects, m.Object.Object)
	}
	r := resultWithWarnings("render", in).WithData(data)
	if res.OfflineSecrets != "" {
		r.Warnings = append(r.Warnings, res.OfflineSecrets)
		r.Status = output.StatusWarning
	}
	r.Notes = res.Notes
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
