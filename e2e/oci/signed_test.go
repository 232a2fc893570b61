package oci

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/cli"
	"helm.sh/helm/v3/pkg/registry"
	"oras.land/oras-go/v2"
	"oras.land/oras-go/v2/content"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster"
	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cosigntest"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/chartsource"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/dist"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/sign"
)

// releaseKey writes a cosign key pair (the release team's) into dir and loads the private key.
func releaseKey(t *testing.T, dir string) (*sign.Key, string) {
	t.Helper()
	priv, pub, err := sign.NewKeyPair([]byte("release-pass"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "cosign.key"), priv, 0o600))
	public := filepath.Join(dir, "cosign.pub")
	require.NoError(t, os.WriteFile(public, pub, 0o644))
	key, err := sign.LoadKey(filepath.Join(dir, "cosign.key"), []byte("release-pass"))
	require.NoError(t, err)
	return key, public
}

// cosignVerify runs `cosign verify --key PUB --insecure-ignore-tlog REF` against the mirror,
// trusting its CA and logged in with the mirror's credentials (a Docker config, as cosign reads
// it).
func cosignVerify(t *testing.T, public, ref string) cosigntest.Result {
	t.Helper()
	docker := t.TempDir()
	cfg, err := os.ReadFile(env.config)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(docker, "config.json"), cfg, 0o600))
	return cosigntest.Run(t, public, []string{"DOCKER_CONFIG=" + docker},
		"verify", "--key", public, "--insecure-ignore-tlog", "--registry-cacert", env.ca.File, ref)
}

// TestSignedChartVerifiesFromTheRegistry: make release's publishing step pushes the chart with
// its provenance, signs it in the registry and pushes Artifact Hub's metadata; a user then
// verifies it from the registry with `cosign verify` and `helm pull --verify`. A signature
// moved onto another version, another key, and a chart pushed without a signature all fail
// cosign's check.
func TestSignedChartVerifiesFromTheRegistry(t *testing.T) {
	ctx := context.Background()
	key, public := releaseKey(t, t.TempDir())
	root, err := cluster.RepoRoot()
	require.NoError(t, err)
	reach := chartsource.RegistryOptions{Config: env.config, CAFile: env.ca.File}
	repository := "oci://" + env.mirror.Host + "/signed"
	var pubs []*dist.Published
	for _, v := range []published{env.v1, env.v2} {
		p, err := dist.PublishChart(ctx, dist.PublishOptions{Archive: v.Archive, Provenance: v.Archive + ".prov",
			Repository: repository, Registry: reach, Key: key, ArtifactHubMetadata: filepath.Join(root, "charts", "artifacthub-repo.yml")})
		require.NoError(t, err)
		assert.Equal(t, env.mirror.Host+"/signed/polyaxon:"+v.Version, p.Ref)
		assert.True(t, strings.HasPrefix(p.Digest, "sha256:"), p.Digest)
		assert.Equal(t, sign.SignatureTag(digest.Digest(p.Digest)), p.Signature)
		pubs = append(pubs, p)
	}

	// cosign verify: the signature is the key's, and it names the manifest's digest.
	res := cosignVerify(t, public, pubs[0].Ref)
	require.NoError(t, res.Err, res.Output)
	t.Logf("cosign verify --key cosign.pub --insecure-ignore-tlog --registry-cacert ca.pem %s:\n%s", pubs[0].Ref, res.Output)
	assert.Contains(t, res.Output, "The signatures were verified against the specified public key")
	var claims []struct {
		Critical struct {
			Image struct {
				Digest string `json:"docker-manifest-digest"`
			} `json:"image"`
		} `json:"critical"`
	}
	out := res.Output[strings.Index(res.Output, "[{"):]
	require.NoError(t, json.Unmarshal([]byte(strings.TrimSpace(out)), &claims), out)
	require.Len(t, claims, 1)
	assert.Equal(t, pubs[0].Digest, claims[0].Critical.Image.Digest)

	// helm pull --verify, through the SDK's pull action: the provenance pushed beside the chart
	// verifies against the archive pulled.
	rc, err := registry.NewRegistryClientWithTLS(io.Discard, "", "", env.ca.File, false, env.config, false)
	require.NoError(t, err)
	pull := action.NewPullWithOpts(action.WithConfig(&action.Configuration{RegistryClient: rc}))
	pull.SetRegistryClient(rc)
	pull.Settings = cli.New()
	pull.Settings.RepositoryCache = t.TempDir()
	pull.Verify, pull.Keyring, pull.Version, pull.DestDir, pull.CaFile = true, env.keyring, env.v1.Version, t.TempDir(), env.ca.File
	printed, err := pull.Run(repository + "/polyaxon")
	require.NoError(t, err, "helm pull --verify")
	t.Logf("helm pull %s/polyaxon --version %s --verify --keyring secring.gpg:\n%s", repository, env.v1.Version, printed)
	assert.Contains(t, printed, "Chart Hash Verified: ")
	assert.FileExists(t, filepath.Join(pull.DestDir, "polyaxon-"+env.v1.Version+".tgz"))

	// Artifact Hub's metadata, as Artifact Hub pulls it.
	repo, err := chartsource.NewRepository(repository+"/polyaxon", reach)
	require.NoError(t, err)
	desc, raw, err := oras.FetchBytes(ctx, repo, dist.ArtifactHubTag, oras.DefaultFetchBytesOptions)
	require.NoError(t, err)
	var manifest ocispec.Manifest
	require.NoError(t, json.Unmarshal(raw, &manifest))
	assert.Equal(t, dist.ArtifactHubConfigMediaType, manifest.Config.MediaType)
	require.Len(t, manifest.Layers, 1, "%v", desc)
	assert.Equal(t, dist.ArtifactHubLayerMediaType, manifest.Layers[0].MediaType)
	layer, err := content.FetchAll(ctx, repo, manifest.Layers[0])
	require.NoError(t, err)
	want, err := os.ReadFile(filepath.Join(root, "charts", "artifacthub-repo.yml"))
	require.NoError(t, err)
	assert.Equal(t, string(want), string(layer))

	// A hostile copy: version 1's signature placed where cosign looks for version 2's. The
	// signature is valid, but for another digest: cosign refuses it.
	v1sig, err := repo.Resolve(ctx, pubs[0].Signature)
	require.NoError(t, err)
	require.NoError(t, repo.Tag(ctx, v1sig, pubs[1].Signature))
	res = cosignVerify(t, public, pubs[1].Ref)
	assert.Error(t, res.Err, "a signature moved onto another version is refused: %s", res.Output)
	assert.NotContains(t, res.Output, "The signatures were verified")

	// Another key, and a chart pushed without a signature (setup's, by plain Helm).
	_, otherPublic := releaseKey(t, t.TempDir())
	res = cosignVerify(t, otherPublic, pubs[0].Ref)
	assert.Error(t, res.Err, "another key: %s", res.Output)
	res = cosignVerify(t, public, env.mirror.Host+"/"+repoPath+":"+env.v1.Version)
	assert.Error(t, res.Err, "an unsigned chart: %s", res.Output)
	assert.Contains(t, res.Output, "no signatures found")
}

// Publishing refuses a missing key before anything is pushed, and a registry that refuses the
// credentials leaves no chart behind.
func TestPublishRefusals(t *testing.T) {
	ctx := context.Background()
	repository := "oci://" + env.mirror.Host + "/refused"
	_, err := dist.PublishChart(ctx, dist.PublishOptions{Archive: env.v1.Archive, Repository: repository,
		Registry: chartsource.RegistryOptions{Config: env.config, CAFile: env.ca.File}})
	require.ErrorContains(t, err, "COSIGN_KEY")

	key, _ := releaseKey(t, t.TempDir())
	wrong := filepath.Join(t.TempDir(), "config.json")
	require.NoError(t, writeRegistryConfig(wrong, env.mirror.Host, "ci", "not-the-password"))
	_, err = dist.PublishChart(ctx, dist.PublishOptions{Archive: env.v1.Archive, Repository: repository,
		Registry: chartsource.RegistryOptions{Config: wrong, CAFile: env.ca.File}, Key: key})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "refused/polyaxon:"+env.v1.Version)

	_, err = dist.PublishChart(ctx, dist.PublishOptions{Archive: env.v1.Archive, Repository: "https://" + env.mirror.Host + "/refused", Key: key})
	assert.ErrorContains(t, err, "oci://HOST/PATH")

	repo, err := chartsource.NewRepository(repository+"/polyaxon", chartsource.RegistryOptions{Config: env.config, CAFile: env.ca.File})
	require.NoError(t, err)
	_, err = repo.Resolve(ctx, env.v1.Version)
	assert.Error(t, err, "nothing was pushed")
}
