package backup

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"filippo.io/age"
)

// A backup leaves the machine that took it (a bucket, another team's disk): Encrypt seals its
// dump and its Secrets with age (filippo.io/age: X25519, ChaCha20-Poly1305 in 64 KiB chunks,
// each authenticated) to the recipients' public keys, so that only a holder of one of their
// private keys reads them. The manifest stays readable (what the backup is, its size, its row
// counts) and records each sealed file's sha256, so that `verify` tells a damaged or altered
// file without the key; with it, verify and restore open the files into a private directory
// inside the backup and read them there.

// EncryptedExt is the extension of a sealed file.
const EncryptedExt = ".age"

// Encryption is the manifest's record of a sealed backup.
type Encryption struct {
	// Scheme is "age".
	Scheme string `json:"scheme"`
	// Recipients are the public keys it was sealed to (age1...).
	Recipients []string `json:"recipients"`
	// Files are the sealed files: the dump's parts and secrets.json, each with EncryptedExt.
	Files []SealedFile `json:"files"`
}

// SealedFile is one file sealed with age.
type SealedFile struct {
	// Plain is the file's name before sealing (a dump part, secrets.json).
	Plain  string `json:"plain"`
	File   string `json:"file"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// ErrEncrypted says a sealed backup was to be read without a key.
var ErrEncrypted = errors.New("the backup is encrypted")

// ParseRecipients reads age public keys (age1...), as given to --encrypt-to, or lines of a
// recipients file (# comments allowed).
func ParseRecipients(keys []string) ([]age.Recipient, []string, error) {
	var out []age.Recipient
	var names []string
	for _, k := range keys {
		k = strings.TrimSpace(k)
		if k == "" || strings.HasPrefix(k, "#") {
			continue
		}
		r, err := age.ParseX25519Recipient(k)
		if err != nil {
			return nil, nil, fmt.Errorf("--encrypt-to %q: %v (fix: an age public key, age1..., from `age-keygen -y key.txt`)", k, err)
		}
		out, names = append(out, r), append(names, r.String())
	}
	if len(out) == 0 {
		return nil, nil, errors.New("--encrypt-to: no recipient given (fix: an age public key, age1...)")
	}
	return out, names, nil
}

// ReadIdentities reads an age identity file (AGE-SECRET-KEY-1... lines, as age-keygen writes).
func ReadIdentities(path string) ([]age.Identity, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("--identity: %w", err)
	}
	defer f.Close()
	ids, err := age.ParseIdentities(f)
	if err != nil {
		return nil, fmt.Errorf("--identity %s: %v (fix: the private key file age-keygen wrote)", path, err)
	}
	return ids, nil
}

// Encrypt seals a finished backup in place: each of its dump's parts and secrets.json is
// written sealed beside itself (name + EncryptedExt), then the manifest is rewritten to record
// them, then the plain files are removed. Until the manifest is rewritten the backup is the
// plain one, whole; an interrupted Encrypt leaves it so (and at most some .age files, which a
// new Encrypt replaces).
func Encrypt(ctx context.Context, dir string, recipients []age.Recipient, names []string) (*Manifest, error) {
	m, err := ReadManifest(dir)
	if err != nil {
		return nil, err
	}
	if m.Encryption != nil {
		// Sealed, but an interrupted run may have left plain copies: the sealed files are
		// whole (checked), so the copies go.
		if err := checkSealedFiles(ctx, dir, m); err != nil {
			return nil, err
		}
		return m, removePlain(dir, m)
	}
	if len(recipients) == 0 {
		return nil, errors.New("encrypting a backup needs at least one recipient")
	}
	var plain []string
	for _, p := range m.Parts() {
		plain = append(plain, p.File)
	}
	if m.Secrets {
		plain = append(plain, SecretsFile)
	}
	enc := &Encryption{Scheme: "age", Recipients: names}
	for _, name := range plain {
		sealed, err := sealFile(ctx, dir, name, recipients)
		if err != nil {
			return nil, fmt.Errorf("encrypting %s: %w", filepath.Join(dir, name), err)
		}
		enc.Files = append(enc.Files, sealed)
	}
	m.Encryption = enc
	doc, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := writeFileAtomic(dir, ManifestFile, append(doc, '\n'), 0o600); err != nil {
		return nil, fmt.Errorf("backup: writing %s: %w", filepath.Join(dir, ManifestFile), err)
	}
	return m, removePlain(dir, m)
}

// removePlain removes the plain files of a sealed backup that are still there.
func removePlain(dir string, m *Manifest) error {
	for _, f := range m.Encryption.Files {
		if err := os.Remove(filepath.Join(dir, f.Plain)); err != nil && !os.IsNotExist(err) {
			return fmt.Errorf("removing the plain %s after sealing it: %w", f.Plain, err)
		}
	}
	return syncDir(dir)
}

// sealFile writes dir/name sealed to dir/name.age (via a temporary name) and returns its
// record.
func sealFile(ctx context.Context, dir, name string, recipients []age.Recipient) (SealedFile, error) {
	in, err := os.Open(filepath.Join(dir, name))
	if err != nil {
		return SealedFile{}, err
	}
	defer in.Close()
	final := filepath.Join(dir, name+EncryptedExt)
	tmp := final + partialExt
	_ = os.Remove(tmp) // left by an interrupted Encrypt
	out, err := os.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return SealedFile{}, err
	}
	hash := sha256.New()
	buf := bufio.NewWriterSize(io.MultiWriter(out, hash), 1<<20)
	w, err := age.Encrypt(buf, recipients...)
	if err == nil {
		_, err = io.CopyBuffer(w, ctxReader{ctx: ctx, r: in}, make([]byte, 1<<20))
		if cerr := w.Close(); err == nil {
			err = cerr
		}
	}
	if err == nil {
		err = buf.Flush()
	}
	var size int64
	if err == nil {
		err = out.Sync()
	}
	if err == nil {
		var st os.FileInfo
		if st, err = out.Stat(); err == nil {
			size = st.Size()
		}
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, final)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return SealedFile{}, err
	}
	return SealedFile{Plain: name, File: name + EncryptedExt, Size: size, SHA256: hex.EncodeToString(hash.Sum(nil))}, nil
}

// checkSealed checks each sealed file's size and sha256 against the manifest, without a key,
// and that no plain copy is left beside them (an interrupted sealing).
func checkSealed(ctx context.Context, dir string, m *Manifest) error {
	for _, f := range m.Encryption.Files {
		if _, err := os.Lstat(filepath.Join(dir, f.Plain)); err == nil {
			return fmt.Errorf("%s: %w: a plain copy of %s is left beside %s (an interrupted sealing): remove %s",
				dir, ErrIncomplete, f.Plain, f.File, filepath.Join(dir, f.Plain))
		}
	}
	return checkSealedFiles(ctx, dir, m)
}

// checkSealedFiles checks each sealed file's size and sha256 against the manifest.
func checkSealedFiles(ctx context.Context, dir string, m *Manifest) error {
	for _, s := range m.Encryption.Files {
		p := DumpPart{File: s.File, Size: s.Size, SHA256: s.SHA256}
		if err := checksumFile(ctx, filepath.Join(dir, s.File), p); err != nil {
			return fmt.Errorf("%s: %w", dir, err)
		}
	}
	return nil
}

// opened is a sealed backup opened into a private directory inside it.
type opened struct {
	dir string
}

func (o *opened) Close() error { return os.RemoveAll(o.dir) }

// open checks each sealed file's sha256 and opens it with the identities into a new private
// directory (mode 0700) under the temporary directory ($TMPDIR), never beside the sealed
// files: those may be on a shared disk or a bucket's mount. The manifest there is the one
// before sealing. The caller reads the plain backup there and closes it, which removes it.
func open(ctx context.Context, dir string, m *Manifest, ids []age.Identity) (*opened, error) {
	if len(ids) == 0 {
		return nil, fmt.Errorf("backup %s: %w with age (to %s): give the private key (fix: --identity key.txt)", dir, ErrEncrypted, strings.Join(m.Encryption.Recipients, ", "))
	}
	if err := checkSealed(ctx, dir, m); err != nil {
		return nil, err
	}
	plainDir, err := os.MkdirTemp("", "polyaxon-deploy-opened-")
	if err != nil {
		return nil, err
	}
	o := &opened{dir: plainDir}
	for _, s := range m.Encryption.Files { // names checked by ReadManifest
		if err := openFile(ctx, filepath.Join(dir, s.File), filepath.Join(plainDir, s.Plain), ids); err != nil {
			_ = o.Close()
			return nil, fmt.Errorf("backup %s: opening %s: %w", dir, s.File, err)
		}
	}
	plain := *m
	plain.Encryption, plain.Dir = nil, plainDir
	doc, err := json.MarshalIndent(&plain, "", "  ")
	if err == nil {
		err = writeFileAtomic(plainDir, ManifestFile, append(doc, '\n'), 0o600)
	}
	if err != nil {
		_ = o.Close()
		return nil, err
	}
	return o, nil
}

// openFile decrypts src into dst. age authenticates every chunk: a changed byte, a cut file or
// another key fails here, before anything reads the plain file.
func openFile(ctx context.Context, src, dst string, ids []age.Identity) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	r, err := age.Decrypt(bufio.NewReaderSize(ctxReader{ctx: ctx, r: in}, 1<<20), ids...)
	if err != nil {
		return err
	}
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	_, err = io.CopyBuffer(out, r, make([]byte, 1<<20))
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}
