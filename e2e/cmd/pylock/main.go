// Command pylock turns pip's installation report (`pip install --dry-run --report FILE`) into a
// requirements file that pins every package of the resolved set with its archive's sha256, for
// `pip install --require-hashes --no-deps`. It is how e2e/polyaxon/requirements-*.txt are made:
//
//	e2e/scripts/install-polyaxon.sh --lock 2.15.1
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

type report struct {
	Environment map[string]string `json:"environment"`
	Install     []struct {
		Metadata struct {
			Name    string `json:"name"`
			Version string `json:"version"`
		} `json:"metadata"`
		Requested    bool `json:"requested"`
		DownloadInfo struct {
			URL         string `json:"url"`
			ArchiveInfo struct {
				Hashes map[string]string `json:"hashes"`
			} `json:"archive_info"`
		} `json:"download_info"`
	} `json:"install"`
}

func main() {
	header := flag.String("header", "", "a comment line written first (the command that made the file)")
	flag.Parse()
	if err := run(os.Stdin, os.Stdout, *header); err != nil {
		fmt.Fprintln(os.Stderr, "pylock:", err)
		os.Exit(1)
	}
}

func run(in io.Reader, out io.Writer, header string) error {
	var r report
	if err := json.NewDecoder(in).Decode(&r); err != nil {
		return fmt.Errorf("reading pip's report: %w", err)
	}
	if len(r.Install) == 0 {
		return fmt.Errorf("pip's report installs nothing: was it made with --ignore-installed?")
	}
	lines := make([]string, 0, len(r.Install))
	for _, p := range r.Install {
		sum := p.DownloadInfo.ArchiveInfo.Hashes["sha256"]
		if sum == "" {
			return fmt.Errorf("%s %s has no sha256 in pip's report (a local or VCS source cannot be pinned)", p.Metadata.Name, p.Metadata.Version)
		}
		lines = append(lines, fmt.Sprintf("%s==%s \\\n    --hash=sha256:%s", strings.ToLower(p.Metadata.Name), p.Metadata.Version, sum))
	}
	sort.Strings(lines)
	if header != "" {
		fmt.Fprintf(out, "# %s\n", header)
	}
	fmt.Fprintf(out, "# Resolved for CPython %s on %s %s; one archive per package.\n",
		r.Environment["python_full_version"], r.Environment["sys_platform"], r.Environment["platform_machine"])
	for _, l := range lines {
		fmt.Fprintln(out, l)
	}
	return nil
}
