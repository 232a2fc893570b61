package backup

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
)

// A backup also lives where it is not a directory (a bucket): these say which files make it
// up and check one read from anywhere against its manifest.

// StoredFiles are the files a finished backup holds besides its manifest, in the order they
// are best copied: the dump's parts (or their sealed copies), then secrets.json. Every name is
// a plain file name (ReadManifest checks them).
func (m *Manifest) StoredFiles() []string {
	var names []string
	if m.Encryption != nil {
		for _, f := range m.Encryption.Files {
			names = append(names, f.File)
		}
		return names
	}
	for _, p := range m.Parts() {
		names = append(names, p.File)
	}
	if m.Secrets {
		names = append(names, SecretsFile)
	}
	return names
}

// CheckedFiles are the stored files whose size and sha256 the manifest records: the sealed
// files of a sealed backup, the dump's parts otherwise.
func (m *Manifest) CheckedFiles() []DumpPart {
	if m.Encryption == nil {
		return m.Parts()
	}
	var parts []DumpPart
	for _, f := range m.Encryption.Files {
		parts = append(parts, DumpPart{File: f.File, Size: f.Size, SHA256: f.SHA256})
	}
	return parts
}

// CheckStored reads one of CheckedFiles from r to its end and compares its size and sha256
// with what the manifest recorded.
func CheckStored(ctx context.Context, r io.Reader, p DumpPart) error {
	h := sha256.New()
	n, err := io.Copy(h, ctxReader{ctx, r})
	if err != nil {
		return fmt.Errorf("reading %s: %w", p.File, err)
	}
	if n != p.Size {
		return fmt.Errorf("%w: %s is %d bytes but the manifest recorded %d; %s", ErrTruncated, p.File, n, p.Size, fixHint)
	}
	return checksumError(p, hex.EncodeToString(h.Sum(nil)), nil, "")
}
