package main

import (
	"github.com/urfave/cli/v2"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/output"
)

// startInputsCommand is how every command that renders this run's inputs begins (check,
// render): the result printer, then the chart, profile and layered values. The input
// migration warnings are already on stderr when it returns, so they come before any progress.
// Rendering is left to the caller: each command renders with its own options.
func startInputsCommand(c *cli.Context) (*output.Printer, *inputs, error) {
	p, err := printer(c)
	if err != nil {
		return nil, nil, err
	}
	in, err := loadInputs(c)
	if err != nil {
		return nil, nil, err
	}
	warnInputs(c, in)
	return p, in, nil
}
