package dist

import (
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"

	cdx "github.com/CycloneDX/cyclonedx-go"
)

// WriteSBOM writes a CycloneDX SBOM (JSON) of the Go binary at bin to out: the binary as the
// application, with its hash, platform and commit, and every module linked into it with its
// version and go.sum hash, read from the binary's own build information (what was built, not
// what go.mod asks for).
func WriteSBOM(bin, out string) error {
	info, err := buildinfo.ReadFile(bin)
	if err != nil {
		return fmt.Errorf("reading the build information of %s: %w", bin, err)
	}
	sum, err := fileSHA256(bin)
	if err != nil {
		return err
	}
	settings := map[string]string{}
	var props []cdx.Property
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
		switch s.Key {
		case "GOOS", "GOARCH", "CGO_ENABLED", "vcs", "vcs.revision", "vcs.time", "vcs.modified", "-trimpath":
			props = append(props, cdx.Property{Name: "go:build:" + s.Key, Value: s.Value})
		}
	}
	props = append(props, cdx.Property{Name: "go:toolchain", Value: info.GoVersion})
	main := cdx.Component{
		BOMRef: purl(info.Main.Path, info.Main.Version), Type: cdx.ComponentTypeApplication,
		Name: filepath.Base(bin), Version: info.Main.Version, PackageURL: purl(info.Main.Path, info.Main.Version),
		Hashes: &[]cdx.Hash{{Algorithm: cdx.HashAlgoSHA256, Value: sum}}, Properties: &props,
	}
	var modules []cdx.Component
	var refs []string
	for _, d := range info.Deps {
		if d.Replace != nil {
			d = d.Replace
		}
		c := cdx.Component{BOMRef: purl(d.Path, d.Version), Type: cdx.ComponentTypeLibrary, Name: d.Path,
			Version: d.Version, PackageURL: purl(d.Path, d.Version), Scope: cdx.ScopeRequired}
		if d.Sum != "" {
			c.Properties = &[]cdx.Property{{Name: "go:module:sum", Value: d.Sum}}
		}
		modules = append(modules, c)
		refs = append(refs, c.BOMRef)
	}
	bom := cdx.NewBOM()
	bom.SerialNumber = "urn:uuid:" + uuidFrom(sum)
	bom.Metadata = &cdx.Metadata{Component: &main}
	if t := settings["vcs.time"]; t != "" {
		bom.Metadata.Timestamp = t // the commit's time: the same build gives the same SBOM
	}
	bom.Components = &modules
	bom.Dependencies = &[]cdx.Dependency{{Ref: main.BOMRef, Dependencies: &refs}}
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	enc := cdx.NewBOMEncoder(f, cdx.BOMFileFormatJSON)
	enc.SetPretty(true)
	if err := enc.Encode(bom); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", out, err)
	}
	return f.Close()
}

// purl is a Go module's package URL.
func purl(path, version string) string {
	if version == "" || version == "(devel)" {
		return "pkg:golang/" + path
	}
	return "pkg:golang/" + path + "@" + version
}

// uuidFrom makes a version-4-shaped UUID from a hex digest, so that a binary's SBOM has a
// stable serial number.
func uuidFrom(hexSum string) string {
	b, _ := hex.DecodeString(hexSum[:32])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b)
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
