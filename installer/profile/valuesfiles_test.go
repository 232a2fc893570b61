package profile_test

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/chartutil"
	"sigs.k8s.io/yaml"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/profile"
)

var update = flag.Bool("update", false, "rewrite values/<profile>.yaml from the profiles")

// valuesFile is a profile's values as a plain Helm values file: what a user of the chart alone
// (helm, Argo CD, Flux) passes with -f to get the profile's release. The policy is the
// installer's; the header says what it asks of a Helm user instead.
func valuesFile(p *profile.Profile) ([]byte, error) {
	body, err := yaml.Marshal(p.Values)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "# The chart values of the %s profile (profiles/%s.yaml), for the chart alone:\n", p.Name, p.Name)
	fmt.Fprintf(&b, "#   helm upgrade --install polyaxon charts/polyaxon -f values/%s.yaml -f my-values.yaml \\\n", p.Name)
	fmt.Fprintf(&b, "#     --set migrations.useHelmHooks=true\n")
	fmt.Fprintf(&b, "# Generated: go test ./installer/profile -run TestProfileValuesFiles -update (edit the profile).\n")
	fmt.Fprintf(&b, "# The profile's policy is polyaxon-deploy's; without it, do by hand:\n")
	fmt.Fprintf(&b, "#   label the namespace pod-security.kubernetes.io/enforce=%s\n", p.Policy.PodSecurityLevel)
	if p.Policy.BackupRequired {
		fmt.Fprintf(&b, "#   back the database up before every upgrade (polyaxon-deploy backup works on any release)\n")
	}
	if p.Policy.MinGatewayReplicas > 1 {
		fmt.Fprintf(&b, "#   keep gateway.replicas at %d or more\n", p.Policy.MinGatewayReplicas)
	}
	b.Write(body)
	return b.Bytes(), nil
}

// values/<profile>.yaml hold each profile's values, generated: Helm users get exactly the
// release the profile renders.
func TestProfileValuesFiles(t *testing.T) {
	for _, name := range profile.Names() {
		p, err := profile.Load(name)
		require.NoError(t, err)
		want, err := valuesFile(p)
		require.NoError(t, err)
		path := filepath.Join("..", "..", "values", name+".yaml")
		if *update {
			require.NoError(t, os.WriteFile(path, want, 0o644))
		}
		got, err := os.ReadFile(path)
		require.NoError(t, err, "values/%s.yaml: go test ./installer/profile -run TestProfileValuesFiles -update", name)
		assert.Equal(t, string(want), string(got), "values/%s.yaml differs from profile %s: go test ./installer/profile -run TestProfileValuesFiles -update", name, name)

		// Read as Helm reads -f, the file is the profile's values.
		vals, err := chartutil.ReadValues(got)
		require.NoError(t, err)
		assert.Equal(t, p.Values, map[string]any(vals), "values/%s.yaml read by Helm", name)
	}
}
