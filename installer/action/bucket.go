package action

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/backup"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/bucket"
)

// Backups may be kept in a bucket (s3://BUCKET/PREFIX) as well as in a directory: a backup
// goes there once it is written and verified here, and comes back into a private directory
// before anything reads it, so that everything else works on a directory.

// openBucket reaches the bucket a --dir or a PATH names.
func openBucket(ctx context.Context, where string) (*bucket.Store, bucket.Location, error) {
	loc, err := bucket.ParseLocation(where)
	if err != nil {
		return nil, bucket.Location{}, &UsageError{Err: err}
	}
	store, err := bucket.Open(ctx)
	if err != nil {
		return nil, bucket.Location{}, err
	}
	return store, loc, nil
}

// Fetched is a backup brought here from where it is kept.
type Fetched struct {
	// Dir is the backup directory to read.
	Dir string
	// Name is what the user named it by: the directory, or the backup's s3:// location
	// (.../latest resolved).
	Name    string
	cleanup func()
}

// Close removes the private copy of a backup fetched from a bucket.
func (f *Fetched) Close() {
	if f.cleanup != nil {
		f.cleanup()
	}
}

// FetchBackup makes the backup at path (a directory, or s3://BUCKET/PREFIX/NAME, NAME may be
// "latest") readable as a directory: a bucket's backup is copied into a new private directory
// under $TMPDIR, which Close removes. The copy is not checked here: verify and restore check
// every file against the manifest before they use it.
func FetchBackup(ctx context.Context, e *Env, path string) (*Fetched, error) {
	if !bucket.IsLocation(path) {
		return &Fetched{Dir: path, Name: path}, nil
	}
	store, loc, err := openBucket(ctx, path)
	if err != nil {
		return nil, err
	}
	if loc, err = store.Resolve(ctx, loc); err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "polyaxon-deploy-fetched-")
	if err != nil {
		return nil, err
	}
	f := &Fetched{Name: loc.String(), cleanup: func() { _ = os.RemoveAll(tmp) }}
	_, name := loc.Split()
	f.Dir = filepath.Join(tmp, name)
	e.progress().Step(fmt.Sprintf("Copying backup %s here (into %s)", f.Name, tmp))
	if _, err := store.Download(ctx, loc, f.Dir); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// bucketTarget is where a backup goes when --dir names a bucket: it is written into a private
// directory here (staging), then uploaded.
type bucketTarget struct {
	store   *bucket.Store
	loc     bucket.Location
	staging string
}

// prepareBucket checks that backups can be written to where (the bucket exists, the
// credentials are accepted, an object can be written) before anything is dumped, and makes
// the staging directory.
func prepareBucket(ctx context.Context, where string) (*bucketTarget, error) {
	store, loc, err := openBucket(ctx, where)
	if err != nil {
		return nil, err
	}
	if err := store.CheckWritable(ctx, loc); err != nil {
		return nil, fmt.Errorf("--dir %s: %w: nothing was dumped", where, err)
	}
	staging, err := os.MkdirTemp("", "polyaxon-deploy-staging-")
	if err != nil {
		return nil, err
	}
	return &bucketTarget{store: store, loc: loc, staging: staging}, nil
}

// upload sends the finished backup in dir to the bucket; it returns the backup's location.
func (b *bucketTarget) upload(ctx context.Context, dir string) (string, error) {
	to := b.loc.Join(filepath.Base(dir))
	if err := b.store.Upload(ctx, dir, to); err != nil {
		return "", fmt.Errorf("backup %s: %w: it was not kept (what was uploaded has no manifest: backup list shows it incomplete, prune leaves it); take it again", to, err)
	}
	return to.String(), nil
}

func (b *bucketTarget) close() { _ = os.RemoveAll(b.staging) }

// listBucket lists the backups under a bucket's location, and how to check each one's files
// against its manifest without copying them.
func listBucket(ctx context.Context, where string) ([]backup.Entry, func(context.Context, int) error, error) {
	store, loc, err := openBucket(ctx, where)
	if err != nil {
		return nil, nil, err
	}
	listed, err := store.List(ctx, loc)
	if err != nil {
		return nil, nil, err
	}
	entries := make([]backup.Entry, len(listed))
	for i, e := range listed {
		entries[i] = e.Entry
	}
	return entries, func(ctx context.Context, i int) error { return store.Checksum(ctx, listed[i]) }, nil
}

// PruneBackups applies r to the backups in a directory or under a bucket's location.
func PruneBackups(ctx context.Context, where string, r backup.Retention, dryRun bool) ([]backup.Pruned, error) {
	now := time.Now()
	if !bucket.IsLocation(where) {
		return backup.Prune(where, r, now, dryRun)
	}
	store, loc, err := openBucket(ctx, where)
	if err != nil {
		return nil, err
	}
	return store.Prune(ctx, loc, r, now, dryRun)
}

// dirTarget is where a sealed backup goes when --dir is a directory: written and sealed in a
// private directory here (staging), then copied in, its manifest last.
type dirTarget struct {
	dir, staging string
}

func prepareDir(dir string) (*dirTarget, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("--dir %s: %w", dir, err)
	}
	staging, err := os.MkdirTemp("", "polyaxon-deploy-staging-")
	if err != nil {
		return nil, err
	}
	return &dirTarget{dir: dir, staging: staging}, nil
}

// keep copies the sealed backup in staged into the backups' directory: its files, then its
// manifest, so that a copy that stops half way is an unfinished backup.
func (d *dirTarget) keep(staged string) (string, error) {
	m, err := backup.ReadManifest(staged)
	if err != nil {
		return "", err
	}
	to := filepath.Join(d.dir, filepath.Base(staged))
	if err := os.Mkdir(to, 0o700); err != nil {
		return "", fmt.Errorf("backup %s: %w", to, err)
	}
	for _, name := range append(m.StoredFiles(), backup.ManifestFile) {
		if err := copyFile(filepath.Join(staged, name), filepath.Join(to, name)); err != nil {
			return "", fmt.Errorf("backup %s: copying %s: %w: it was not kept; take it again", to, name, err)
		}
	}
	return to, nil
}

func (d *dirTarget) close() { _ = os.RemoveAll(d.staging) }

// copyFile copies src to a new dst (mode 0600) and syncs it.
func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
