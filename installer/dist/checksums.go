package dist

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// ChecksumsFile names the release's checksums, one "sha256  name" line per file, as
// `sha256sum -c checksums.txt` reads them.
const ChecksumsFile = "checksums.txt"

// WriteChecksums writes ChecksumsFile in dir over files (names in dir), sorted.
func WriteChecksums(dir string, files []string) error {
	var b strings.Builder
	for _, name := range slices.Sorted(slices.Values(files)) {
		sum, err := fileSHA256(filepath.Join(dir, name))
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s  %s\n", sum, name)
	}
	return os.WriteFile(filepath.Join(dir, ChecksumsFile), []byte(b.String()), 0o644)
}
