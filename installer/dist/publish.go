package dist

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/registry"
	"oras.land/oras-go/v2"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/chartsource"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/sign"
)

// Artifact Hub reads a repository's metadata (artifacthub-repo.yml: owners, ignored versions,
// a verified publisher's id) from this tag of the chart's repository, an artifact of these
// media types (Artifact Hub's docs, "Helm charts repositories", OCI).
const (
	ArtifactHubTag             = "artifacthub.io"
	ArtifactHubConfigMediaType = "application/vnd.cncf.artifacthub.config.v1+yaml"
	ArtifactHubLayerMediaType  = "application/vnd.cncf.artifacthub.repository-metadata.layer.v1.yaml"
)

// PublishOptions say what chart goes where.
type PublishOptions struct {
	// Archive is the chart's .tgz; Provenance its .prov ("" when it has none).
	Archive, Provenance string
	// Repository is oci://HOST/PATH: the chart lands at HOST/PATH/<name>:<version>, as `helm
	// push` places it.
	Repository string
	Registry   chartsource.RegistryOptions
	// Key signs the pushed chart (cosign's signature image); required.
	Key *sign.Key
	// ArtifactHubMetadata is artifacthub-repo.yml, pushed under ArtifactHubTag when set.
	ArtifactHubMetadata string
}

// Published says where the chart went.
type Published struct {
	// Ref is HOST/PATH/<name>:<version>; Digest the manifest's digest.
	Ref, Digest string
	// Signature is the signature image's tag (sha256-<hex>.sig).
	Signature string
}

// PublishChart pushes the archive with its provenance through Helm's registry client, signs
// the pushed manifest by its digest, and pushes Artifact Hub's metadata. Everything it reads
// (files, key, the registry's TLS and credentials settings) is read before the first push: a
// missing file or key changes nothing in the registry. A signing that fails after the push
// says the chart is published unsigned.
func PublishChart(ctx context.Context, o PublishOptions) (*Published, error) {
	if o.Key == nil {
		return nil, errors.New("publishing the chart needs the signing key (fix: COSIGN_KEY=cosign.key, the password in " + sign.PasswordEnv + ")")
	}
	if !registry.IsOCI(o.Repository) {
		return nil, fmt.Errorf("--push %q: not an OCI repository (fix: oci://HOST/PATH)", o.Repository)
	}
	data, err := os.ReadFile(o.Archive)
	if err != nil {
		return nil, err
	}
	ch, err := loader.LoadArchive(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("%s is not a chart archive: %w", o.Archive, err)
	}
	var pushOpts []registry.PushOption
	if o.Provenance != "" {
		prov, err := os.ReadFile(o.Provenance)
		if err != nil {
			return nil, err
		}
		pushOpts = append(pushOpts, registry.PushOptProvData(prov))
	}
	var metadata []byte
	if o.ArtifactHubMetadata != "" {
		if metadata, err = os.ReadFile(o.ArtifactHubMetadata); err != nil {
			return nil, err
		}
	}

	repoRef := strings.TrimSuffix(strings.TrimPrefix(o.Repository, registry.OCIScheme+"://"), "/") + "/" + ch.Metadata.Name
	ref := repoRef + ":" + ch.Metadata.Version
	client, err := chartsource.NewRegistryClient(o.Registry, nil)
	if err != nil {
		return nil, err
	}
	repo, err := chartsource.NewRepository(repoRef, o.Registry)
	if err != nil {
		return nil, err
	}
	pushed, err := client.Push(data, ref, pushOpts...)
	if err != nil {
		return nil, fmt.Errorf("pushing %s: %w", ref, err)
	}
	unsigned := func(err error) error {
		return fmt.Errorf("%s was pushed but is not signed: %w (fix: publish again; until then `cosign verify` refuses it)", ref, err)
	}
	desc, err := repo.Resolve(ctx, pushed.Manifest.Digest)
	if err != nil {
		return nil, unsigned(err)
	}
	if _, err := o.Key.SignArtifact(ctx, repo, desc); err != nil {
		return nil, unsigned(err)
	}
	if metadata != nil {
		if err := pushArtifactHubMetadata(ctx, repo, metadata); err != nil {
			return nil, err
		}
	}
	return &Published{Ref: ref, Digest: pushed.Manifest.Digest, Signature: sign.SignatureTag(desc.Digest)}, nil
}

// pushArtifactHubMetadata pushes artifacthub-repo.yml as Artifact Hub reads it: an empty
// config of its config media type and the file as the one layer.
func pushArtifactHubMetadata(ctx context.Context, repo oras.Target, metadata []byte) error {
	config, err := oras.PushBytes(ctx, repo, ArtifactHubConfigMediaType, []byte{})
	if err != nil {
		return fmt.Errorf("pushing Artifact Hub's metadata: %w", err)
	}
	layer, err := oras.PushBytes(ctx, repo, ArtifactHubLayerMediaType, metadata)
	if err != nil {
		return fmt.Errorf("pushing Artifact Hub's metadata: %w", err)
	}
	manifest, err := oras.PackManifest(ctx, repo, oras.PackManifestVersion1_0, "", oras.PackManifestOptions{
		ConfigDescriptor: &config, Layers: []ocispec.Descriptor{layer}})
	if err != nil {
		return fmt.Errorf("pushing Artifact Hub's metadata: %w", err)
	}
	if err := repo.Tag(ctx, manifest, ArtifactHubTag); err != nil {
		return fmt.Errorf("tagging Artifact Hub's metadata: %w", err)
	}
	return nil
}
