package values

import (
	"bufio"
	"os"
	"slices"
	"strings"
)

// profilesMarker opens the comment line of a documented values file (values/*.yaml) that names
// the profiles it is meant for: "# profiles: production".
const profilesMarker = "# profiles:"

// ExampleFor says whether the documented values file at path is meant for profile: true unless
// its leading comments name the profiles it is for and profile is not one of them. The tests
// and the chart scan render each file with each profile it is for.
func ExampleFor(path, profile string) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if !strings.HasPrefix(line, "#") {
			break // the leading comments only
		}
		if rest, ok := strings.CutPrefix(line, profilesMarker); ok {
			var names []string
			for _, n := range strings.Split(rest, ",") {
				names = append(names, strings.TrimSpace(n))
			}
			return slices.Contains(names, profile), nil
		}
	}
	return true, sc.Err()
}
