package sign

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/sigstore/sigstore/pkg/signature/payload"
	"oras.land/oras-go/v2"
	"oras.land/oras-go/v2/registry/remote"
)

// Media types and the annotation of cosign's signature images (cosign's pkg/types and
// pkg/oci/static): one layer per signature, holding the signed payload, the signature in the
// layer's annotation.
const (
	SimpleSigningMediaType = "application/vnd.dev.cosign.simplesigning.v1+json"
	SignatureAnnotation    = "dev.cosignproject.cosign/signature"
)

// SignatureTag is the tag cosign reads an artifact's signatures from: sha256-<hex>.sig in the
// artifact's own repository.
func SignatureTag(d digest.Digest) string {
	return d.Algorithm().String() + "-" + d.Encoded() + ".sig"
}

// SignArtifact signs the manifest desc of repo (a chart, an image) as `cosign sign --key`
// does, and pushes the signature image under SignatureTag(desc.Digest), replacing one that was
// there. The payload names the repository and the manifest's digest: a signature copied to
// another artifact does not verify.
func (k *Key) SignArtifact(ctx context.Context, repo *remote.Repository, desc ocispec.Descriptor) (ocispec.Descriptor, error) {
	ref, err := name.NewDigest(repo.Reference.Registry + "/" + repo.Reference.Repository + "@" + desc.Digest.String())
	if err != nil {
		return ocispec.Descriptor{}, fmt.Errorf("signing %s@%s: %w", repo.Reference, desc.Digest, err)
	}
	body, err := payload.Cosign{Image: ref}.MarshalJSON()
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	sig, err := k.Sign(body)
	if err != nil {
		return ocispec.Descriptor{}, fmt.Errorf("signing %s: %w", ref, err)
	}
	layer, err := oras.PushBytes(ctx, repo, SimpleSigningMediaType, body)
	if err != nil {
		return ocispec.Descriptor{}, fmt.Errorf("pushing the signature of %s: %w", ref, err)
	}
	layer.Annotations = map[string]string{SignatureAnnotation: base64.StdEncoding.EncodeToString(sig)}
	// An image config naming the one layer: cosign reads the signature image with
	// go-containerregistry, which expects a config of an image.
	config, err := json.Marshal(ocispec.Image{
		Platform: ocispec.Platform{},
		RootFS:   ocispec.RootFS{Type: "layers", DiffIDs: []digest.Digest{layer.Digest}},
	})
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	configDesc, err := oras.PushBytes(ctx, repo, ocispec.MediaTypeImageConfig, config)
	if err != nil {
		return ocispec.Descriptor{}, fmt.Errorf("pushing the signature of %s: %w", ref, err)
	}
	manifest, err := oras.PackManifest(ctx, repo, oras.PackManifestVersion1_0, "", oras.PackManifestOptions{
		ConfigDescriptor: &configDesc, Layers: []ocispec.Descriptor{layer}})
	if err != nil {
		return ocispec.Descriptor{}, fmt.Errorf("pushing the signature of %s: %w", ref, err)
	}
	if err := repo.Tag(ctx, manifest, SignatureTag(desc.Digest)); err != nil {
		return ocispec.Descriptor{}, fmt.Errorf("tagging the signature of %s: %w", ref, err)
	}
	return manifest, nil
}
