package release_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/values"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/release"
	rt "github.com/polyaxon-deploy/polyaxon-deploy/installer/release/releasetest"
)

// valuesFile is a realistic values file of about 3 KiB that changes with every upgrade.
func valuesFile(rev int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# production values, edited for upgrade %d\nimage:\n  tag: \"2.15.%d\"\n", rev, rev)
	for _, c := range []string{"gateway", "scheduler", "worker", "beat", "agent", "operator", "postgresql", "rabbitmq", "redis"} {
		fmt.Fprintf(&b, "%s:\n  replicas: %d\n  resources:\n    requests: {cpu: %dm, memory: %dMi}\n    limits: {cpu: %dm, memory: %dMi}\n"+
			"  nodeSelector: {polyaxon: core}\n  tolerations: []\n  podAnnotations: {team: ml-platform, revision: \"%d\"}\n",
			c, 1+rev%3, 100+rev, 256+rev, 1000+rev, 1024+rev, rev)
	}
	return b.String()
}

// Every upgrade -f layers its file over the stored ones, so the inputs of revision N hold N
// files. 50 upgrades, each with an edited values file and a new --set, plus the same file
// given again unchanged: the Secret stays far below Kubernetes' 1 MiB limit, and the inputs
// still rebuild the newest revision exactly.
func TestStoredInputsStayBounded(t *testing.T) {
	ctx := context.Background()
	f := rt.New(t)
	stored := release.Inputs{Profile: "production", ValuesFiles: []values.File{{Name: "values.yaml", Content: valuesFile(1)}}}
	require.NoError(t, f.Client.SaveInputs(ctx, 1, stored))
	raw := 0
	for rev := 2; rev <= 50; rev++ {
		got, n, err := f.Client.InputsFor(ctx, rev-1)
		require.NoError(t, err)
		require.Equal(t, rev-1, n)
		require.Equal(t, stored, got, "revision %d reads back what was stored", rev-1)
		now := release.Inputs{
			ValuesFiles: []values.File{{Name: "values.yaml", Content: valuesFile(rev)}, {Name: "common.yaml", Content: valuesFile(0)}},
			Set:         []string{fmt.Sprintf("gateway.replicas=%d", rev%4+1), "logLevel=INFO"},
		}
		stored = got.Layer(now, false)
		raw = 0
		for _, v := range stored.ValuesFiles {
			raw += len(v.Content)
		}
		require.NoError(t, f.Client.SaveInputs(ctx, rev, stored))
	}
	s, err := f.Clientset.CoreV1().Secrets(rt.Namespace).Get(ctx, release.InputsSecretName(rt.Name), metav1.GetOptions{})
	require.NoError(t, err)
	size := 0
	for k, v := range s.Data {
		size += len(k) + len(v)
	}
	t.Logf("Secret %s: %d keys, %d bytes (the newest inputs alone hold %d bytes of values files)", s.Name, len(s.Data), size, raw)
	assert.Less(t, size, 128<<10, "50 upgrades' inputs must stay well below the 1 MiB Secret limit")
	assert.LessOrEqual(t, len(s.Data), release.DefaultMaxHistory, "only the newest revisions are kept")

	got, _, err := f.Client.InputsFor(ctx, 50)
	require.NoError(t, err)
	n := len(got.ValuesFiles)
	assert.Equal(t, valuesFile(50), got.ValuesFiles[n-2].Content, "this run's files come last, in order")
	assert.Equal(t, valuesFile(0), got.ValuesFiles[n-1].Content)
	assert.Equal(t, 1, strings.Count(fmt.Sprint(got.ValuesFiles), valuesFile(0)), "a file given again unchanged is kept once, at its last place")
	assert.Equal(t, []string{"gateway.replicas=4", "gateway.replicas=1", "gateway.replicas=2", "gateway.replicas=3", "logLevel=INFO"},
		got.Set, "a --set repeated unchanged is kept once, at its last place")
}

// Entries written by earlier versions (plain JSON) are still read, and replaced by the
// compressed entry when their revision is written again.
func TestStoredInputsReadsPlainEntries(t *testing.T) {
	ctx := context.Background()
	f := rt.New(t)
	old := `{"profile":"development","set":["logLevel=DEBUG"]}`
	_, err := f.Clientset.CoreV1().Secrets(rt.Namespace).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: release.InputsSecretName(rt.Name), Namespace: rt.Namespace},
		Data:       map[string][]byte{"revision-3.json": []byte(old)},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	got, rev, err := f.Client.InputsFor(ctx, 4)
	require.NoError(t, err)
	assert.Equal(t, 3, rev)
	assert.Equal(t, release.Inputs{Profile: "development", Set: []string{"logLevel=DEBUG"}}, got)

	require.NoError(t, f.Client.SaveInputs(ctx, 3, release.Inputs{Profile: "production"}))
	got, _, err = f.Client.InputsFor(ctx, 3)
	require.NoError(t, err)
	assert.Equal(t, "production", got.Profile)
	s, err := f.Clientset.CoreV1().Secrets(rt.Namespace).Get(ctx, release.InputsSecretName(rt.Name), metav1.GetOptions{})
	require.NoError(t, err)
	assert.NotContains(t, s.Data, "revision-3.json")
	assert.Contains(t, s.Data, "revision-3.json.gz")
}
