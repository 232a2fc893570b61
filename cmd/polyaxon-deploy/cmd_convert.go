package main

// Values written for the official polyaxon/polyaxon chart: `convert-values FILE`, and
// --from-official-values FILE on the commands that render (the same conversion, in memory,
// as a values layer beneath the -f files). The table lives in installer/convert.

import (
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/action"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/convert"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/output"
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
	env := actionEnv(c)
	res, err := env.ConvertOfficial(officialOf(c, file))
	if err != nil {
		return usageExit(err)
	}
	w := progress(c).Writer() // one event per line with -o json|yaml
	for _, e := range res.Entries {
		fmt.Fprintln(w, "  "+e.String())
	}
	mapped, ignored, unmapped := res.Counts()
	fmt.Fprintf(w, "%d key(s) mapped, %d ignored, %d not mapped\n", mapped, ignored, unmapped)
	if s := res.DefaultsSummary(); s != "" {
		fmt.Fprintln(w, s)
	}
	fmt.Fprintln(w, "Note: "+res.EdgeNote())
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

// officialOf are the conversion's flags for the official values file.
func officialOf(c *cli.Context, file string) action.Official {
	return action.Official{File: file, AllowUnmapped: c.Bool(flagAllowUnmapped), KeepDefaults: c.Bool(flagKeepDefaults), Version: c.String(flagOfficialVersion)}
}
