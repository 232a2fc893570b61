package charts_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// artifactHubAnnotation decodes one artifacthub.io/* annotation of Chart.yaml (a YAML string).
func artifactHubAnnotation(t *testing.T, name string, into any) {
	t.Helper()
	v, ok := loadChart(t).Metadata.Annotations["artifacthub.io/"+name]
	require.True(t, ok, "Chart.yaml has no artifacthub.io/%s annotation", name)
	require.NoError(t, yaml.UnmarshalStrict([]byte(v), into), "artifacthub.io/%s", name)
}

// Artifact Hub scans the images a chart lists for vulnerabilities: the list is every image a
// default install runs, at the tag it runs, and nothing else.
func TestArtifactHubImagesAreTheDefaultInstallsImages(t *testing.T) {
	var listed []struct{ Name, Image string }
	artifactHubAnnotation(t, "images", &listed)
	var images []string
	for _, p := range render(t).pods(t) {
		for _, c := range append(slices.Clone(p.spec.InitContainers), p.spec.Containers...) {
			if !slices.Contains(images, c.Image) {
				images = append(images, c.Image)
			}
		}
	}
	var got []string
	for _, l := range listed {
		assert.NotEmpty(t, l.Name, l.Image)
		got = append(got, l.Image)
	}
	assert.ElementsMatch(t, images, got, "artifacthub.io/images in Chart.yaml")
}

// The CRDs Artifact Hub lists are the ones the chart installs.
func TestArtifactHubCRDsAreTheChartsCRDs(t *testing.T) {
	var listed []struct{ Kind, Version, Name, DisplayName, Description string }
	artifactHubAnnotation(t, "crds", &listed)
	files, err := filepath.Glob(filepath.Join("polyaxon", "crds", "*.yaml"))
	require.NoError(t, err)
	var want, got []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		var crd apiextensionsv1.CustomResourceDefinition
		require.NoError(t, yaml.Unmarshal(b, &crd), f)
		for _, v := range crd.Spec.Versions {
			if v.Served {
				want = append(want, crd.Spec.Names.Kind+"/"+v.Name+"/"+crd.Spec.Names.Plural+"."+crd.Spec.Group)
			}
		}
	}
	for _, l := range listed {
		assert.NotEmpty(t, l.Description, l.Kind)
		got = append(got, l.Kind+"/"+l.Version+"/"+l.Name)
	}
	assert.ElementsMatch(t, want, got, "artifacthub.io/crds in Chart.yaml")
}

// The repository's metadata file (pushed by make release under the tag artifacthub.io) holds
// only keys Artifact Hub reads, and its ignore rules are regular expressions.
func TestArtifactHubRepositoryMetadata(t *testing.T) {
	b, err := os.ReadFile("artifacthub-repo.yml")
	require.NoError(t, err)
	var meta struct {
		RepositoryID string `json:"repositoryID"`
		Owners       []struct {
			Name  string `json:"name"`
			Email string `json:"email"`
		} `json:"owners"`
		Ignore []struct {
			Name    string `json:"name"`
			Version string `json:"version"`
		} `json:"ignore"`
	}
	require.NoError(t, yaml.UnmarshalStrict(b, &meta))
	for _, ig := range meta.Ignore {
		assert.Equal(t, "polyaxon", ig.Name)
		_, err := regexp.Compile(ig.Version)
		assert.NoError(t, err, ig.Version)
	}
	assert.Equal(t, "ai-machine-learning", loadChart(t).Metadata.Annotations["artifacthub.io/category"])
}
