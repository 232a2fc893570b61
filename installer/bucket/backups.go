package bucket

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/s3/transfermanager"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/backup"
)

// Latest, as a backup's name, is the newest finished, whole backup under the location. It is
// never a folder's name: a folder called so is not a backup (it would win every restore of
// .../latest).
const Latest = "latest"

// backupName is what a backup's folder may be called: polyaxon-deploy names them
// <release>-<UTC time>. Anything else under the location (an escaped "/", a "..", a
// percent sign that reads back as another path) is not a backup, and nothing acts on it.
var backupName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,252}$`)

// IsBackupName says whether name can be a backup's folder.
func IsBackupName(name string) bool {
	return backupName.MatchString(name) && name != Latest && !strings.Contains(name, "..")
}

// clockSkew is how far in the future a backup may be dated and still count: the machine that
// reads the bucket and the one that wrote it need not agree to the second.
const clockSkew = 10 * time.Minute

// maxManifest bounds a manifest read into memory: a real one is a few KiB.
const maxManifest = 16 << 20

// CheckWritable makes sure the backups can go to l before anything is dumped: the bucket
// exists, the credentials are accepted, and an object can be written and removed there.
func (s *Store) CheckWritable(ctx context.Context, l Location) error {
	if _, err := s.client.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(l.Bucket), Prefix: aws.String(l.key("")), MaxKeys: aws.Int32(1)}); err != nil {
		return s.explain(l, err)
	}
	probe := l.key(".polyaxon-deploy-write-check-" + rand.Text())
	if _, err := s.client.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(l.Bucket), Key: aws.String(probe), Body: strings.NewReader("")}); err != nil {
		return s.explain(l, err)
	}
	if _, err := s.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(l.Bucket), Key: aws.String(probe)}); err != nil && refusal(err) != "access" {
		// Keys that may write but not delete (an append-only policy against ransomware) can
		// keep backups; only prune needs to delete.
		return s.explain(l, err)
	}
	return nil
}

// Upload copies the finished backup in dir to l (a backup's location: where the backups are,
// joined with its name), its stored files first and its manifest last. A finished backup
// already at l is never overwritten.
func (s *Store) Upload(ctx context.Context, dir string, l Location) error {
	m, err := backup.ReadManifest(dir)
	if err != nil {
		return err
	}
	if _, err := s.readManifest(ctx, l); err == nil {
		return fmt.Errorf("%s: a finished backup is already there: it is left as it is", s.where(l))
	} else if !errors.Is(err, errNoManifest) {
		return err
	}
	for _, name := range append(m.StoredFiles(), backup.ManifestFile) {
		if err := s.uploadFile(ctx, filepath.Join(dir, name), l, name); err != nil {
			return err
		}
	}
	return nil
}

func (s *Store) uploadFile(ctx context.Context, file string, l Location, name string) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	_, err = s.transfer.UploadObject(ctx, &transfermanager.UploadObjectInput{
		Bucket: aws.String(l.Bucket), Key: aws.String(l.key(name)), Body: f, ContentLength: aws.Int64(st.Size()),
	})
	if err != nil {
		return fmt.Errorf("uploading %s: %w", name, s.explain(l, err))
	}
	return nil
}

var errNoManifest = errors.New("no manifest")

// readManifest reads and checks the manifest of the backup at l.
func (s *Store) readManifest(ctx context.Context, l Location) (*backup.Manifest, error) {
	b, err := s.manifestBytes(ctx, l)
	if err != nil {
		return nil, err
	}
	return backup.ParseManifest(b, l.String())
}

// manifestBytes reads the manifest of the backup at l as it is stored.
// maxUnrecorded bounds a stored file whose size the manifest does not record (a plain
// secrets.json): a few KiB in a real backup.
const maxUnrecorded = 64 << 20

// checkSizes compares the objects' sizes with what the manifest recorded before anything is
// copied: an object grown in the bucket would otherwise fill this machine's disk first.
func (s *Store) checkSizes(ctx context.Context, l Location, m *backup.Manifest) error {
	sizes := map[string]int64{}
	if err := s.eachPage(ctx, l, func(objects []types.Object) error {
		for _, o := range objects {
			sizes[strings.TrimPrefix(aws.ToString(o.Key), l.key(""))] = aws.ToInt64(o.Size)
		}
		return nil
	}); err != nil {
		return err
	}
	recorded := map[string]int64{}
	for _, p := range m.CheckedFiles() {
		recorded[p.File] = p.Size
	}
	for _, name := range m.StoredFiles() {
		got, ok := sizes[name]
		want, known := recorded[name]
		switch {
		case !ok:
			return fmt.Errorf("backup %s: %w: %s is missing from the bucket; use another backup (polyaxon-deploy backup list) or take a new one", l, backup.ErrIncomplete, name)
		case known && got != want:
			return fmt.Errorf("backup %s: %w: %s is %d bytes in the bucket but the manifest recorded %d: it changed after the upload; use another backup (polyaxon-deploy backup list)", l, backup.ErrTruncated, name, got, want)
		case !known && got > maxUnrecorded:
			return fmt.Errorf("backup %s: %s is %d bytes: not a file of ours (at most %d)", l, name, got, maxUnrecorded)
		}
	}
	return nil
}

func (s *Store) manifestBytes(ctx context.Context, l Location) ([]byte, error) {
	out, err := s.client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(l.Bucket), Key: aws.String(l.key(backup.ManifestFile))})
	if err != nil {
		var nk *types.NoSuchKey
		if errors.As(err, &nk) {
			return nil, fmt.Errorf("backup %s: %w: no %s: the backup did not finish (its upload failed or was interrupted), or there is no backup of that name (polyaxon-deploy backup list --dir %s)",
				l, errNoManifest, backup.ManifestFile, parent(l))
		}
		return nil, s.explain(l, err)
	}
	defer out.Body.Close()
	b, err := io.ReadAll(io.LimitReader(out.Body, maxManifest+1))
	if err != nil {
		return nil, fmt.Errorf("backup %s: reading %s: %w", l, backup.ManifestFile, err)
	}
	if len(b) > maxManifest {
		return nil, fmt.Errorf("backup %s: %s is over %d bytes: not a manifest of ours", l, backup.ManifestFile, maxManifest)
	}
	return b, nil
}

func parent(l Location) Location { p, _ := l.Split(); return p }

// Download copies the backup at l into dir (made private, and empty), the files its manifest
// names and nothing else, and returns the manifest read from dir. The caller verifies the
// files (backup.Verify, backup.Restore check each against the manifest).
func (s *Store) Download(ctx context.Context, l Location, dir string) (*backup.Manifest, error) {
	doc, err := s.manifestBytes(ctx, l)
	if err != nil {
		return nil, err
	}
	m, err := backup.ParseManifest(doc, l.String())
	if err != nil {
		return nil, err
	}
	if err := s.checkSizes(ctx, l, m); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	for _, name := range m.StoredFiles() {
		if err := s.downloadFile(ctx, l, name, filepath.Join(dir, name)); err != nil {
			return nil, err
		}
	}
	// The manifest last, the bytes read first: a directory with a manifest is a finished
	// backup, and it names exactly the files copied.
	if err := os.WriteFile(filepath.Join(dir, backup.ManifestFile), doc, 0o600); err != nil {
		return nil, err
	}
	return backup.ReadManifest(dir)
}

func (s *Store) downloadFile(ctx context.Context, l Location, name, file string) error {
	f, err := os.OpenFile(file, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	_, err = s.transfer.DownloadObject(ctx, &transfermanager.DownloadObjectInput{Bucket: aws.String(l.Bucket), Key: aws.String(l.key(name)), WriterAt: f})
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		var nk *types.NoSuchKey
		if errors.As(err, &nk) {
			return fmt.Errorf("backup %s: %w: %s is missing from the bucket; %s", l, backup.ErrIncomplete, name, "use another backup (polyaxon-deploy backup list) or take a new one")
		}
		if strings.Contains(err.Error(), "checksum did not match") {
			// The store's own checksum of the object (recorded at upload) no longer matches.
			return fmt.Errorf("backup %s: %w: %s changed in the bucket after it was uploaded (%v); use another backup (polyaxon-deploy backup list) or take a new one",
				l, backup.ErrChecksum, name, err)
		}
		return fmt.Errorf("downloading %s: %w", name, s.explain(l, err))
	}
	return nil
}

// Listed is one backup under a location.
type Listed struct {
	backup.Entry
	// Location is the backup's, as listed (never read back from Entry.Dir).
	Location Location
	// Sizes are the sizes of the backup's objects, by file name.
	Sizes map[string]int64
}

// List returns the backups under l, newest first, as backup.List does for a directory: one
// without a readable manifest is listed with a Problem. Objects directly under l (not in a
// backup's folder) are not backups and are left out.
func (s *Store) List(ctx context.Context, l Location) ([]Listed, error) {
	byName := map[string]*Listed{}
	newest := map[string]time.Time{}
	prefix := l.key("") // "a/b/", or "" at the bucket's top
	if err := s.eachPage(ctx, l, func(objects []types.Object) error {
		for _, o := range objects {
			name, file, ok := strings.Cut(strings.TrimPrefix(aws.ToString(o.Key), prefix), "/")
			if !ok || !IsBackupName(name) || strings.Contains(file, "/") {
				continue
			}
			e := byName[name]
			if e == nil {
				e = &Listed{Entry: backup.Entry{Dir: l.Join(name).String()}, Location: l.Join(name), Sizes: map[string]int64{}}
				byName[name] = e
			}
			e.Sizes[file] = aws.ToInt64(o.Size)
			if t := aws.ToTime(o.LastModified); t.After(newest[name]) {
				newest[name] = t
			}
		}
		return nil
	}); err != nil {
		return nil, err
	}
	out := make([]Listed, 0, len(byName))
	for name, e := range byName {
		if _, ok := e.Sizes[backup.ManifestFile]; !ok {
			e.Problem = fmt.Sprintf("backup %s: no %s: the backup did not finish (its upload failed or was interrupted)", e.Dir, backup.ManifestFile)
			e.Time = newest[name].UTC()
		} else if m, err := s.readManifest(ctx, l.Join(name)); err != nil {
			e.Problem, e.Time = err.Error(), newest[name].UTC()
		} else {
			e.Manifest, e.Time = m, m.StartedAt
		}
		out = append(out, *e)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if !out[i].Time.Equal(out[j].Time) {
			return out[i].Time.After(out[j].Time)
		}
		return out[i].Dir > out[j].Dir
	})
	return out, nil
}

// NotWhole says why a listed finished backup does not count as one ("" when it does): a file
// its manifest names is missing or of another size, or it is dated after now.
func (e Listed) NotWhole(now time.Time) string {
	if why := backup.StartedInTheFuture(e.Manifest, now); why != "" {
		return why
	}
	for _, name := range e.Manifest.StoredFiles() {
		if _, ok := e.Sizes[name]; !ok {
			return name + " missing"
		}
	}
	for _, p := range e.Manifest.CheckedFiles() {
		if e.Sizes[p.File] != p.Size {
			return fmt.Sprintf("%s is %d bytes, its manifest recorded %d", p.File, e.Sizes[p.File], p.Size)
		}
	}
	return ""
}

// Checksum reads each file of a listed finished backup whose sha256 its manifest records and
// compares it, without copying the backup anywhere.
func (s *Store) Checksum(ctx context.Context, e Listed) error {
	l := e.Location
	if why := e.NotWhole(time.Now().Add(clockSkew)); why != "" {
		return fmt.Errorf("%s: %w: %s", e.Dir, backup.ErrIncomplete, why)
	}
	for _, p := range e.Manifest.CheckedFiles() {
		out, err := s.client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(l.Bucket), Key: aws.String(l.key(p.File))})
		if err != nil {
			return s.explain(l, err)
		}
		err = backup.CheckStored(ctx, out.Body, p)
		out.Body.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", e.Dir, err)
		}
	}
	return nil
}

// Resolve is the location of a backup named by l: l itself, or for .../latest the newest
// finished, whole backup there.
func (s *Store) Resolve(ctx context.Context, l Location) (Location, error) {
	where, name := l.Split()
	if name != Latest {
		if !IsBackupName(name) {
			return Location{}, fmt.Errorf("%s: %q is not a backup's name (polyaxon-deploy backup list --dir %s)", l, name, where)
		}
		return l, nil
	}
	listed, err := s.List(ctx, where)
	if err != nil {
		return Location{}, err
	}
	now := time.Now().Add(clockSkew)
	for _, e := range listed {
		if e.Manifest != nil && e.NotWhole(now) == "" {
			return e.Location, nil
		}
	}
	return Location{}, fmt.Errorf("%s: no finished backup under %s (polyaxon-deploy backup list --dir %s)", l, where, where)
}

// Remove deletes the backup at l: its manifest first, so that a removal that stops half way
// leaves an unfinished backup, never a finished one with files missing. Only a backup's folder
// is removed: never a location whose last element is not a backup's name.
func (s *Store) Remove(ctx context.Context, l Location) error {
	if _, name := l.Split(); !IsBackupName(name) {
		return fmt.Errorf("%s: %q is not a backup's name: nothing removed", l, name)
	}
	if _, err := s.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(l.Bucket), Key: aws.String(l.key(backup.ManifestFile))}); err != nil {
		return s.explain(l, err)
	}
	return s.eachPage(ctx, l, func(objects []types.Object) error {
		if len(objects) == 0 {
			return nil
		}
		ids := make([]types.ObjectIdentifier, 0, len(objects))
		for _, o := range objects {
			ids = append(ids, types.ObjectIdentifier{Key: o.Key})
		}
		out, err := s.client.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: aws.String(l.Bucket), Delete: &types.Delete{Objects: ids, Quiet: aws.Bool(true)}})
		if err != nil {
			return s.explain(l, err)
		}
		if len(out.Errors) > 0 {
			e := out.Errors[0]
			return fmt.Errorf("%s: removing %s: %s: %s", l, aws.ToString(e.Key), aws.ToString(e.Code), aws.ToString(e.Message))
		}
		return nil
	})
}

// eachPage calls fn with each page of the objects under l (a page is at most 1,000 objects:
// what one DeleteObjects takes).
func (s *Store) eachPage(ctx context.Context, l Location, fn func([]types.Object) error) error {
	pages := s3.NewListObjectsV2Paginator(s.client, &s3.ListObjectsV2Input{Bucket: aws.String(l.Bucket), Prefix: aws.String(l.key(""))})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return s.explain(l, err)
		}
		if err := fn(page.Contents); err != nil {
			return err
		}
	}
	return nil
}

// Prune applies r to the backups under l as backup.Prune does to a directory. The backup that
// counts as a release's newest is read whole first (its sha256 against its manifest): a
// damaged one is left alone and not counted, so it never pushes a good one out.
func (s *Store) Prune(ctx context.Context, l Location, r backup.Retention, now time.Time, dryRun bool) ([]backup.Pruned, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	listed, err := s.List(ctx, l)
	if err != nil {
		return nil, err
	}
	entries := make([]backup.Entry, len(listed))
	whole := map[string]string{}
	where := map[string]Location{}
	verified := map[string]bool{} // releases whose newest whole backup was read
	for i, e := range listed {
		entries[i], where[e.Dir] = e.Entry, e.Location
		if e.Manifest == nil {
			continue
		}
		why := e.NotWhole(now.Add(clockSkew))
		release := e.Manifest.Namespace + "/" + e.Manifest.Release
		if why == "" && !verified[release] {
			if err := s.Checksum(ctx, e); err != nil {
				if ctx.Err() != nil {
					return nil, ctx.Err()
				}
				why = "damaged (" + firstLine(err.Error()) + ")"
			} else {
				verified[release] = true
			}
		}
		whole[e.Dir] = why
	}
	out := backup.Select(entries, r, now, func(e backup.Entry) string { return whole[e.Dir] })
	if dryRun {
		return out, nil
	}
	for _, p := range out {
		if !p.Removed {
			continue
		}
		if err := s.Remove(ctx, where[p.Dir]); err != nil {
			return out, fmt.Errorf("removing backup %s: %w", p.Dir, err)
		}
	}
	return out, nil
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
