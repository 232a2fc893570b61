package dist

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	cdx "github.com/CycloneDX/cyclonedx-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/mod/modfile"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cosigntest"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/chartpkg"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/sign"
)

// A release for this machine's platform, built from the repository: the binary says its
// version and the commit it was built from, its SBOM lists what was linked in, the checksums
// catch a changed file, and cosign verifies every file's signature with the public key.
func TestReleaseOfThisPlatform(t *testing.T) {
	if testing.Short() {
		t.Skip("builds polyaxon-deploy")
	}
	ctx := context.Background()
	module, err := filepath.Abs("../..")
	require.NoError(t, err)
	dest := t.TempDir()
	keys := t.TempDir()
	priv, pub, err := sign.NewKeyPair([]byte("release-pass"))
	require.NoError(t, err)
	publicKey := filepath.Join(keys, "cosign.pub")
	require.NoError(t, os.WriteFile(filepath.Join(keys, "cosign.key"), priv, 0o600))
	require.NoError(t, os.WriteFile(publicKey, pub, 0o644))
	key, err := sign.LoadKey(filepath.Join(keys, "cosign.key"), []byte("release-pass"))
	require.NoError(t, err)

	target := Target{runtime.GOOS, runtime.GOARCH}
	res, err := Build(ctx, Options{Module: module, Package: "./cmd/polyaxon-deploy", Name: "polyaxon-deploy", Version: "v9.8.7",
		Targets: []Target{target}, Dest: dest, Chart: &chartpkg.Options{ChartDir: filepath.Join(module, "charts", "polyaxon")}, Key: key})
	require.NoError(t, err)
	name := "polyaxon-deploy_9.8.7_" + runtime.GOOS + "_" + runtime.GOARCH
	assert.Equal(t, []string{name}, res.Binaries)
	assert.Equal(t, []string{name + ".cdx.json"}, res.SBOMs)
	assert.Regexp(t, `^polyaxon-\d+\.\d+\.\d+\.tgz$`, res.Chart)
	assert.ElementsMatch(t, []string{name + ".sig", name + ".cdx.json.sig", res.Chart + ".sig", ChecksumsFile + ".sig"}, res.Signatures)

	// Every file verifies with cosign and the public key alone.
	verify := func(file string) cosigntest.Result {
		return cosigntest.Run(t, publicKey, nil, "verify-blob", "--key", publicKey, "--signature", filepath.Join(dest, file+".sig"),
			"--insecure-ignore-tlog", filepath.Join(dest, file))
	}
	for _, f := range []string{name, name + ".cdx.json", res.Chart, ChecksumsFile} {
		r := verify(f)
		assert.NoError(t, r.Err, "cosign verify-blob %s: %s", f, r.Output)
	}

	// The binary's own account of itself.
	out, err := exec.CommandContext(ctx, filepath.Join(dest, name), "version", "-o", "json").Output()
	require.NoError(t, err)
	var printed struct {
		Data struct{ Version, Commit, Date string } `json:"data"`
	}
	require.NoError(t, json.Unmarshal(out, &printed), "%s", out)
	assert.Equal(t, "v9.8.7", printed.Data.Version)
	head, err := exec.CommandContext(ctx, "git", "-C", module, "rev-parse", "HEAD").Output()
	if err == nil { // a git checkout: Go stamps the commit
		assert.Equal(t, strings.TrimSpace(string(head)), strings.TrimSuffix(printed.Data.Commit, "-dirty"))
		assert.NotEmpty(t, printed.Data.Date)
	}

	// The SBOM: the binary's hash, and the modules of go.mod at the versions linked in.
	f, err := os.Open(filepath.Join(dest, name+".cdx.json"))
	require.NoError(t, err)
	defer f.Close()
	var bom cdx.BOM
	require.NoError(t, cdx.NewBOMDecoder(f, cdx.BOMFileFormatJSON).Decode(&bom))
	sum, err := fileSHA256(filepath.Join(dest, name))
	require.NoError(t, err)
	require.NotNil(t, bom.Metadata.Component.Hashes)
	assert.Equal(t, sum, (*bom.Metadata.Component.Hashes)[0].Value)
	assert.Contains(t, *bom.Metadata.Component.Properties, cdx.Property{Name: "go:build:GOOS", Value: runtime.GOOS})
	gomod, err := os.ReadFile(filepath.Join(module, "go.mod"))
	require.NoError(t, err)
	mf, err := modfile.Parse("go.mod", gomod, nil)
	require.NoError(t, err)
	linked := map[string]string{}
	for _, c := range *bom.Components {
		linked[c.Name] = c.Version
	}
	for _, want := range []string{"helm.sh/helm/v3", "k8s.io/client-go", "github.com/jackc/pgx/v5"} {
		for _, r := range mf.Require {
			if r.Mod.Path == want {
				assert.Equal(t, r.Mod.Version, linked[want], want)
			}
		}
	}

	// checksums.txt covers every file, and tells a changed one.
	assert.Empty(t, verifyChecksums(t, dest))
	b, err := os.ReadFile(filepath.Join(dest, name+".cdx.json"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dest, name+".cdx.json"), append(b, ' '), 0o644))
	assert.Equal(t, []string{name + ".cdx.json"}, verifyChecksums(t, dest))
	r := verify(name + ".cdx.json")
	assert.Error(t, r.Err, "a changed file's signature does not verify: %s", r.Output)

	// A release goes to a new directory.
	_, err = Build(ctx, Options{Module: module, Package: "./cmd/polyaxon-deploy", Name: "polyaxon-deploy", Version: "v9.8.7",
		Targets: []Target{target}, Dest: dest, Key: key})
	assert.ErrorContains(t, err, "is not empty")

	// A release without a key is refused before anything is built, unless it says it is a
	// trial build.
	unsigned := filepath.Join(t.TempDir(), "release")
	_, err = Build(ctx, Options{Module: module, Package: "./cmd/polyaxon-deploy", Name: "polyaxon-deploy", Version: "v9.8.7",
		Targets: []Target{target}, Dest: unsigned})
	require.ErrorContains(t, err, "COSIGN_KEY")
	assert.NoDirExists(t, unsigned)
}

// verifyChecksums checks dir's checksums.txt as sha256sum -c would, and returns the files that
// differ; every file of dir but checksums.txt must be listed.
func verifyChecksums(t *testing.T, dir string) []string {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, ChecksumsFile))
	require.NoError(t, err)
	defer f.Close()
	listed := map[string]bool{}
	var bad []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		sum, name, ok := strings.Cut(sc.Text(), "  ")
		require.True(t, ok, sc.Text())
		listed[name] = true
		got, err := fileSHA256(filepath.Join(dir, name))
		require.NoError(t, err)
		if got != sum {
			bad = append(bad, name)
		}
	}
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range entries {
		// The signatures are made after the checksums, checksums.txt's own included.
		if e.Name() != ChecksumsFile && !strings.HasSuffix(e.Name(), ".sig") {
			assert.True(t, listed[e.Name()], "%s is not in %s", e.Name(), ChecksumsFile)
		}
	}
	return bad
}

func TestParseTargets(t *testing.T) {
	got, err := ParseTargets("linux/amd64, darwin/arm64")
	require.NoError(t, err)
	assert.Equal(t, []Target{{"linux", "amd64"}, {"darwin", "arm64"}}, got)
	for _, bad := range []string{"linux", "/amd64", "linux/", ""} {
		_, err := ParseTargets(bad)
		assert.Error(t, err, bad)
	}
}
