package release

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/values"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
)

// Inputs is what the user asked for: the profile, the contents of each -f file and each --set,
// in order. Upgrades re-render values from the chart, the profile and these inputs (never Helm's
// --reuse-values, which freezes the old chart's defaults into the release).
//
// Storage: one Secret per release, <release>-polyaxon-deploy-inputs, with one key per Helm
// revision (revision-<N>.json.gz: gzipped JSON; older versions wrote revision-<N>.json). A Secret because -f files often carry passwords; one key per
// revision so that a rollback or a failed upgrade never leaves the stored inputs out of step with
// the deployed revision: LoadInputs reads the entry of the deployed revision. The entry for a new
// revision is written before Helm creates it, so a crash cannot lose the inputs of a revision
// that went on to deploy. Entries follow Helm's history limit.
type Inputs struct {
	Profile string `json:"profile"`
	// ProfileFile holds the profile when it was given as a file path rather than a name.
	ProfileFile *values.File  `json:"profileFile,omitempty"`
	ValuesFiles []values.File `json:"valuesFiles,omitempty"`
	Set         []string      `json:"set,omitempty"`
	SetString   []string      `json:"setString,omitempty"`
	// SetFile is --set-file key=path: Name is the key, Content the file's contents.
	SetFile []values.File `json:"setFile,omitempty"`
}

// Layer returns the inputs for a new run on top of the stored ones: a profile given now replaces
// the stored one; files and --set given now are applied after the stored ones (last wins, as in
// the layering of a single run). reset drops the stored files and --set values. Layering
// only adds: a stored --set is undone by a later --set of the same key, or by reset.
//
// A file (same name and content) or a --set given again is kept once, at its last place:
// applying the same layer again makes its earlier application void, so the values are the
// same, and `upgrade -f values.yaml` repeated does not grow the stored inputs.
func (in Inputs) Layer(now Inputs, reset bool) Inputs {
	out := in.layer(now, reset)
	out.ValuesFiles = lastOfEach(out.ValuesFiles, func(f values.File) values.File { return f })
	out.SetFile = lastOfEach(out.SetFile, func(f values.File) values.File { return f })
	out.Set = lastOfEach(out.Set, func(s string) string { return s })
	out.SetString = lastOfEach(out.SetString, func(s string) string { return s })
	return out
}

// lastOfEach keeps the last occurrence of each item (by key), in order.
func lastOfEach[T any, K comparable](items []T, key func(T) K) []T {
	last := make(map[K]int, len(items))
	for i, it := range items {
		last[key(it)] = i
	}
	var out []T
	for i, it := range items {
		if last[key(it)] == i {
			out = append(out, it)
		}
	}
	return out
}

func (in Inputs) layer(now Inputs, reset bool) Inputs {
	out := Inputs{Profile: in.Profile, ProfileFile: in.ProfileFile}
	if !reset {
		out.ValuesFiles = append(out.ValuesFiles, in.ValuesFiles...)
		out.Set = append(out.Set, in.Set...)
		out.SetString = append(out.SetString, in.SetString...)
		out.SetFile = append(out.SetFile, in.SetFile...)
	}
	if now.Profile != "" {
		out.Profile, out.ProfileFile = now.Profile, now.ProfileFile
	}
	out.ValuesFiles = append(out.ValuesFiles, now.ValuesFiles...)
	out.Set = append(out.Set, now.Set...)
	out.SetString = append(out.SetString, now.SetString...)
	out.SetFile = append(out.SetFile, now.SetFile...)
	return out
}

// ErrNoInputs is returned by LoadInputs when no inputs were stored for the release.
var ErrNoInputs = errors.New("no stored inputs")

const (
	inputsSecretSuffix = "-polyaxon-deploy-inputs"
	inputsKeyPrefix    = "revision-"
	// Entries are gzipped JSON (successive revisions repeat the same files, which compress to
	// little); entries of older versions are plain JSON and still read.
	inputsKeySuffix      = ".json.gz"
	plainInputsKeySuffix = ".json"
	// Secrets hold at most 1 MiB; stay well below it even with a large -f file.
	maxInputsBytes = 900 << 10
)

// InputsSecretName is the name of the Secret holding the release's inputs.
func InputsSecretName(release string) string { return release + inputsSecretSuffix }

func inputsKey(revision int) string {
	return inputsKeyPrefix + strconv.Itoa(revision) + inputsKeySuffix
}

func plainInputsKey(revision int) string {
	return inputsKeyPrefix + strconv.Itoa(revision) + plainInputsKeySuffix
}

// revisionOfKey reads the revision of an entry's key, gzipped or plain.
func revisionOfKey(k string) (int, bool) {
	if !strings.HasPrefix(k, inputsKeyPrefix) {
		return 0, false
	}
	rest := strings.TrimPrefix(k, inputsKeyPrefix)
	switch {
	case strings.HasSuffix(rest, inputsKeySuffix):
		rest = strings.TrimSuffix(rest, inputsKeySuffix)
	case strings.HasSuffix(rest, plainInputsKeySuffix):
		rest = strings.TrimSuffix(rest, plainInputsKeySuffix)
	default:
		return 0, false
	}
	n, err := strconv.Atoi(rest)
	return n, err == nil
}

// encodeInputs is gzipped JSON.
func encodeInputs(in Inputs) ([]byte, error) {
	raw, err := json.Marshal(in)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(raw); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// decodeInputs reads an entry stored under key (gzipped or plain JSON).
func decodeInputs(key string, data []byte) (Inputs, error) {
	var in Inputs
	if strings.HasSuffix(key, inputsKeySuffix) {
		zr, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			return in, err
		}
		if data, err = io.ReadAll(zr); err != nil {
			return in, err
		}
	}
	return in, json.Unmarshal(data, &in)
}

// ToolLabels marks objects that polyaxon-deploy itself (not the chart) creates for a release.
func ToolLabels(release, component string) map[string]string {
	return map[string]string{
		"app.kubernetes.io/name":       "polyaxon-deploy",
		"app.kubernetes.io/instance":   release,
		"app.kubernetes.io/component":  component,
		"app.kubernetes.io/managed-by": "polyaxon-deploy",
	}
}

// SaveInputs stores in as the inputs of revision.
func (c *Client) SaveInputs(ctx context.Context, revision int, in Inputs) error {
	raw, err := encodeInputs(in)
	if err != nil {
		return fmt.Errorf("encoding inputs: %w", err)
	}
	if len(raw) > maxInputsBytes {
		return fmt.Errorf("the inputs of revision %d are %d KiB even compressed, more than a Secret can hold: "+
			"give smaller values files, or upgrade with --reset-values and only the files you need", revision, len(raw)>>10)
	}
	name := InputsSecretName(c.name)
	secrets := c.kube.CoreV1().Secrets(c.namespace)
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		s, err := secrets.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			s = &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: c.namespace, Labels: ToolLabels(c.name, "inputs")},
				Type:       corev1.SecretTypeOpaque,
				Data:       map[string][]byte{inputsKey(revision): raw},
			}
			_, err = secrets.Create(ctx, s, metav1.CreateOptions{})
			return err
		}
		if err != nil {
			return err
		}
		if s.Data == nil {
			s.Data = map[string][]byte{}
		}
		s.Data[inputsKey(revision)] = raw
		delete(s.Data, plainInputsKey(revision))
		pruneInputs(s.Data, revision, c.maxHistory)
		_, err = secrets.Update(ctx, s, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("storing inputs of revision %d in Secret %s/%s: %w", revision, c.namespace, name, err)
	}
	return nil
}

// pruneInputs keeps the newest maxHistory entries (all when maxHistory is 0), then drops the
// oldest until the Secret fits; the entry just written is always kept.
func pruneInputs(data map[string][]byte, keep, maxHistory int) {
	keys := map[int][]string{}
	var revs []int
	for k := range data {
		if n, ok := revisionOfKey(k); ok {
			if len(keys[n]) == 0 {
				revs = append(revs, n)
			}
			keys[n] = append(keys[n], k)
		}
	}
	sort.Ints(revs)
	size := 0
	for _, v := range data {
		size += len(v)
	}
	for i, n := range revs {
		tooMany := maxHistory > 0 && len(revs)-i > maxHistory
		if n == keep || (!tooMany && size <= maxInputsBytes) {
			continue
		}
		for _, k := range keys[n] {
			size -= len(data[k])
			delete(data, k)
		}
	}
}

// InputsFor returns the inputs stored for revision, or the newest entry before it (a revision
// made by plain helm has none).
func (c *Client) InputsFor(ctx context.Context, revision int) (Inputs, int, error) {
	name := InputsSecretName(c.name)
	s, err := c.kube.CoreV1().Secrets(c.namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return Inputs{}, 0, fmt.Errorf("release %s/%s: %w (Secret %s not found)", c.namespace, c.name, ErrNoInputs, name)
	}
	if err != nil {
		return Inputs{}, 0, fmt.Errorf("reading Secret %s/%s: %w", c.namespace, name, err)
	}
	best, bestKey := 0, ""
	for k := range s.Data {
		// A gzipped entry wins over a plain one of the same revision.
		if n, ok := revisionOfKey(k); ok && n <= revision && (n > best || (n == best && k == inputsKey(n))) {
			best, bestKey = n, k
		}
	}
	if best == 0 {
		return Inputs{}, 0, fmt.Errorf("release %s/%s: %w for revision %d or earlier", c.namespace, c.name, ErrNoInputs, revision)
	}
	in, err := decodeInputs(bestKey, s.Data[bestKey])
	if err != nil {
		return Inputs{}, 0, fmt.Errorf("decoding key %s of Secret %s/%s: %w", bestKey, c.namespace, name, err)
	}
	return in, best, nil
}

// LoadInputs returns the inputs of the deployed revision (of the newest one when none is deployed)
// and the revision they were stored for.
func (c *Client) LoadInputs(ctx context.Context) (Inputs, int, error) {
	r, err := c.Deployed(ctx)
	if err != nil {
		return Inputs{}, 0, err
	}
	if r == nil {
		if r, err = c.last(); err != nil {
			return Inputs{}, 0, err
		}
	}
	return c.InputsFor(ctx, r.Version)
}

func (c *Client) deleteInputs(ctx context.Context) error {
	name := InputsSecretName(c.name)
	err := c.kube.CoreV1().Secrets(c.namespace).Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting Secret %s/%s: %w", c.namespace, name, err)
	}
	return nil
}
