package main

// Values written for the official polyaxon/polyaxon chart: `convert-values FILE`, and
// --from-official-values FILE on the commands that render (the same conversion, in memory,
// as a values layer beneath the -f files). The table lives in installer/convert.

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/urfave/cli/v2"
	"helm.sh/helm/v3/pkg/chartutil"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/convert"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/output"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/redact"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/values"
)

const (
	flagFromOfficial    = "from-official-values"
	flagAllowUnmapped   = "allow-unmapped"
	flagKeepDefaults    = "keep-defaults"
	flagOfficialVersion = "official-chart-version"
)

func allowUnmappedFlag() cli.Flag {
	return &cli.BoolFlag{Name: flagAllowUnmapped, Usage: "go on when keys of the official chart cannot be expressed in ours (they are listed either way)", Category: "Input"}
}

// defaultsFlags choose which official defaults a conversion leaves out.
func defaultsFlags() []cli.Flag {
	return []cli.Flag{
		&cli.BoolFlag{Name: flagKeepDefaults, Usage: "convert the values equal to the official chart's defaults too (by default they are left out: helm get values --all prints them, and they are not your choices)", Category: "Input"},
		&cli.StringFlag{Name: flagOfficialVersion, Value: convert.LatestOfficialVersion(), Usage: "the official chart `VERSION` the values file was written for, whose defaults are left out (known: " + strings.Join(convert.OfficialVersions(), ", ") + "; adopt reads the release's own chart)", Category: "Input"},
	}
}

// officialValuesFlags are part of inputFlags: every command that renders takes them.
func officialValuesFlags() []cli.Flag {
	return append([]cli.Flag{
		&cli.StringFlag{Name: flagFromOfficial, Usage: "a values `FILE` written for the official polyaxon/polyaxon chart 2.x: converted in memory (as convert-values does) and layered beneath the -f files", Category: "Input"},
		allowUnmappedFlag(),
	}, defaultsFlags()...)
}

func convertValuesCommand() *cli.Command {
	return &cli.Command{
		Name:      "convert-values",
		Usage:     "convert a values file of the official polyaxon/polyaxon chart 2.x into values for ours",
		UsageText: "polyaxon-deploy convert-values OLD.yaml [--allow-unmapped] [--keep-defaults] [-o table|json|yaml] > new.yaml",
		Description: `Prints the converted values on stdout and, on stderr, what became of every key: mapped
(old -> new), ignored (no effect in ours, with the reason) or NOT MAPPED (with the reason).
A key that cannot be mapped is an error (exit 1, nothing on stdout) unless --allow-unmapped.
Values equal to the official chart's defaults (--official-chart-version) are left out first,
and counted: ` + "`helm get values --all`" + ` prints them, and ours' defaults apply instead;
--keep-defaults converts them too.
The whole table is in docs/migrating-from-official-chart.md ("Every key of the official chart, side by side").
-o table|json|yaml prints the account of every key (and, with json|yaml, the values) as a result.`,
		Flags: joinFlags([]cli.Flag{
			allowUnmappedFlag(),
			&cli.StringFlag{Name: flagOutput, Aliases: []string{"o"}, Usage: "print a result (table, json or yaml) instead of the values file", Category: "Output"},
			debugLogFlag(),
		}, defaultsFlags()),
		Action: runConvertValues,
	}
}

// convertData is the -o payload of convert-values.
type convertData struct {
	Values map[string]any  `json:"values,omitempty"`
	Keys   []convert.Entry `json:"keys"`
	// Defaults are the paths left out as the official chart's defaults.
	Defaults []string       `json:"defaults,omitempty"`
	Counts   map[string]int `json:"counts"`
}

func (d convertData) Table() ([]string, [][]string) {
	var rows [][]string
	for _, e := range d.Keys {
		rows = append(rows, []string{e.Key, string(e.Action), strings.Join(e.To, ", "), e.Reason})
	}
	return []string{"OFFICIAL KEY", "ACTION", "OURS", "WHY"}, rows
}

func runConvertValues(c *cli.Context) error {
	args, err := positionalArgs(c)
	if err != nil {
		return err
	}
	if len(args) != 1 {
		return usageErrorf("convert-values takes one values file (- for stdin), got %q", args)
	}
	file := args[0]
	res, err := convertFile(c, file)
	if err != nil {
		return err
	}
	for _, e := range res.Entries {
		fmt.Fprintln(stderr(c), "  "+e.String())
	}
	mapped, ignored, unmapped := res.Counts()
	fmt.Fprintf(stderr(c), "%d key(s) mapped, %d ignored, %d not mapped\n", mapped, ignored, unmapped)
	if s := res.DefaultsSummary(); s != "" {
		fmt.Fprintln(stderr(c), s)
	}
	fmt.Fprintln(stderr(c), "Note: "+res.EdgeNote())
	checkErr := res.Check(file, c.Bool(flagAllowUnmapped))

	if c.IsSet(flagOutput) {
		p, err := printer(c)
		if err != nil {
			return err
		}
		r := output.NewResult("convert-values", output.StatusOK)
		if unmapped > 0 {
			r.Status = output.StatusWarning
		}
		d := convertData{Keys: res.Entries, Defaults: res.Defaults,
			Counts: map[string]int{"mapped": mapped, "ignored": ignored, "unmapped": unmapped, "defaults": len(res.Defaults)}}
		if checkErr == nil {
			d.Values = res.Values
		}
		if err := p.Print(r.WithData(d)); err != nil {
			return err
		}
		return checkErr
	}
	if checkErr != nil {
		return checkErr
	}
	b, err := res.YAML()
	if err != nil {
		return err
	}
	// The values file goes out whole: its passwords belong in it.
	_, err = rawStdout(c).Write(b)
	return err
}

// convertFile reads and converts a values file of the official chart.
func convertFile(c *cli.Context, file string) (*convert.Result, error) {
	var data []byte
	var err error
	if strings.TrimSpace(file) == "-" {
		data, err = readStdin()
	} else {
		data, err = os.ReadFile(file)
	}
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("values file %s: not found (fix: check the path)", file)
	}
	if err != nil {
		return nil, fmt.Errorf("values file %s: %w", file, err)
	}
	in, err := chartutil.ReadValues(data)
	if err != nil {
		return nil, fmt.Errorf("values file %s: not valid YAML: %w", file, err)
	}
	opts, err := defaultsOption(c)
	if err != nil {
		return nil, err
	}
	// Only what is carried over is a secret of this run: the official chart's well-known
	// default passwords are dropped, and masking them would garble every key name.
	res := convert.Convert(in, opts...)
	envOf(c).scrub.Add(redact.Secrets(res.Values)...)
	return res, nil
}

// defaultsOption is the conversion's WithDefaults, unless --keep-defaults.
func defaultsOption(c *cli.Context) ([]convert.Option, error) {
	if c.Bool(flagKeepDefaults) {
		return nil, nil
	}
	v := c.String(flagOfficialVersion)
	d, err := convert.OfficialDefaults(v)
	if err != nil {
		return nil, usageErrorf("--%s %s: %v", flagOfficialVersion, v, err)
	}
	return []convert.Option{convert.WithDefaults(v, d)}, nil
}

// officialLayer converts --from-official-values FILE into a values file to layer beneath
// this run's -f files, with the warnings to show. nil when the flag is not given.
func officialLayer(c *cli.Context) (*values.File, []values.Warning, error) {
	file := c.String(flagFromOfficial)
	if file == "" {
		return nil, nil, nil
	}
	res, err := convertFile(c, file)
	if err != nil {
		return nil, nil, err
	}
	if err := res.Check(file, c.Bool(flagAllowUnmapped)); err != nil {
		return nil, nil, err
	}
	b, err := res.YAML()
	if err != nil {
		return nil, nil, err
	}
	name := file + " (converted from the official chart)"
	return &values.File{Name: name, Content: string(b)}, res.Warnings(file), nil
}

// readStdin is os.Stdin's content (a variable for tests).
var readStdin = func() ([]byte, error) { return io.ReadAll(os.Stdin) }

