// Command keydiff lists the POLYAXON_* keys that Polyaxon's programs read in one installed
// version and not in another (both installed by e2e/scripts/install-polyaxon.sh), with the file
// that reads each: the facts behind the README's table of what changed for the chart.
//
//	go run ./e2e/cmd/keydiff 2.15.1 2.18.0
package main

import (
	"fmt"
	"os"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/contract/polyaxonkeys"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: keydiff FROM TO (two Polyaxon versions installed by e2e/scripts/install-polyaxon.sh)")
		os.Exit(2)
	}
	from, err := derive(os.Args[1])
	if err == nil {
		var to *polyaxonkeys.Derived
		if to, err = derive(os.Args[2]); err == nil {
			for _, program := range []string{polyaxonkeys.CLI, polyaxonkeys.Haupt} {
				report(program, "removed", from.Readers[program], to.Readers[program])
				report(program, "added", to.Readers[program], from.Readers[program])
			}
			return
		}
	}
	fmt.Fprintln(os.Stderr, "keydiff:", err)
	os.Exit(1)
}

func derive(version string) (*polyaxonkeys.Derived, error) {
	sp, err := polyaxonkeys.SitePackages(polyaxonkeys.VenvDir(version))
	if err != nil {
		return nil, err
	}
	return polyaxonkeys.Derive(sp)
}

// report prints the keys of in that are not in out, each with the file of in that reads it.
func report(program, change string, in, out polyaxonkeys.Keys) {
	for _, k := range in.Sorted() {
		if _, ok := out[k]; !ok {
			fmt.Printf("%s\t%s\t%s\t%s\n", program, change, k, in[k])
		}
	}
}
