package values_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/values"
)

func parse(t *testing.T, s string) map[string]any {
	t.Helper()
	m := map[string]any{}
	require.NoError(t, yaml.Unmarshal([]byte(s), &m))
	return m
}

func TestMigrate(t *testing.T) {
	cases := []struct {
		name      string
		in        string
		want      string
		warnPaths []string
		spelling  string // expected in the first warning's new spelling
	}{
		{
			name:      "nodeSelector keyed by category is renamed",
			in:        "nodeSelector:\n  core: {polyaxon: core}\n  builds: {polyaxon: builds}\n",
			want:      "nodeSelectors:\n  core: {polyaxon: core}\n  builds: {polyaxon: builds}\n",
			warnPaths: []string{"nodeSelector"},
			spelling:  "nodeSelectors:\n  builds:\n    polyaxon: builds\n  core:\n    polyaxon: core",
		},
		{
			name:      "nodeSelector merges into nodeSelectors of other categories",
			in:        "nodeSelector: {core: {a: b}}\nnodeSelectors: {experiments: {c: d}}\n",
			want:      "nodeSelectors: {core: {a: b}, experiments: {c: d}}\n",
			warnPaths: []string{"nodeSelector"},
		},
		{
			name:      "flat nodeSelector (v1) goes to core",
			in:        "nodeSelector: {polyaxon: core}\n",
			want:      "nodeSelectors: {core: {polyaxon: core}}\n",
			warnPaths: []string{"nodeSelector"},
		},
		{
			name:      "tolerations list (v1) goes to core",
			in:        "tolerations:\n- {key: k, operator: Exists}\n",
			want:      "tolerations: {core: [{key: k, operator: Exists}]}\n",
			warnPaths: []string{"tolerations"},
			spelling:  "tolerations:\n  core:\n  - key: k\n    operator: Exists",
		},
		{
			name:      "single toleration per category is wrapped",
			in:        "tolerations:\n  experiments: {key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}\n  core: []\n",
			want:      "tolerations:\n  experiments: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]\n  core: []\n",
			warnPaths: []string{"tolerations.experiments"},
		},
		{
			name:      "single component toleration is wrapped",
			in:        "postgresql:\n  tolerations: {key: key1, operator: Exists, effect: NoSchedule}\n",
			want:      "postgresql:\n  tolerations: [{key: key1, operator: Exists, effect: NoSchedule}]\n",
			warnPaths: []string{"postgresql.tolerations"},
		},
		{
			name:      "top-level affinity (v1) goes to core",
			in:        "affinity:\n  nodeAffinity: {x: y}\n",
			want:      "affinity: {core: {nodeAffinity: {x: y}}}\n",
			warnPaths: []string{"affinity"},
		},
		{
			name:      "old keys renamed",
			in:        "rbac: {enabled: false}\npostgresql:\n  postgresUser: u\n  postgresqlPassword: p\n  postgresDatabase: d\n  existingSecret: s\n  primary: {persistence: {size: 5Gi}}\n",
			want:      "rbac: {create: false}\npostgresql:\n  auth: {username: u, password: p, database: d, existingSecret: s}\n  persistence: {size: 5Gi}\n",
			warnPaths: []string{"rbac.enabled", "postgresql.postgresUser", "postgresql.postgresqlPassword", "postgresql.postgresDatabase", "postgresql.existingSecret", "postgresql.primary.persistence"},
		},
		{
			name:      "nodeSelector into an empty nodeSelectors.core",
			in:        "nodeSelector: {core: {a: b}}\nnodeSelectors: {core: {}}\n",
			want:      "nodeSelectors: {core: {a: b}}\n",
			warnPaths: []string{"nodeSelector"},
		},
		{
			name:      "flat nodeSelector into an empty nodeSelectors.core",
			in:        "nodeSelector: {polyaxon: core}\nnodeSelectors: {core: {}}\n",
			want:      "nodeSelectors: {core: {polyaxon: core}}\n",
			warnPaths: []string{"nodeSelector"},
		},
		{
			name:      "every component's single toleration is wrapped",
			in:        "postgresql:\n  tolerations: {key: a, operator: Exists}\nredis:\n  tolerations: {key: b, operator: Exists}\n",
			want:      "postgresql:\n  tolerations: [{key: a, operator: Exists}]\nredis:\n  tolerations: [{key: b, operator: Exists}]\n",
			warnPaths: []string{"postgresql.tolerations", "redis.tolerations"},
		},
		{
			name: "current spelling untouched",
			in:   "nodeSelectors: {core: {a: b}}\ntolerations: {core: [{operator: Exists}]}\naffinity: {core: {}}\npostgresql: {tolerations: []}\n",
			want: "nodeSelectors: {core: {a: b}}\ntolerations: {core: [{operator: Exists}]}\naffinity: {core: {}}\npostgresql: {tolerations: []}\n",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, warns, err := values.Migrate("f.yaml", parse(t, tc.in))
			require.NoError(t, err)
			assert.Equal(t, parse(t, tc.want), got)
			var paths []string
			for _, w := range warns {
				paths = append(paths, w.Path)
				assert.Equal(t, "f.yaml", w.Source)
				assert.Contains(t, w.String(), "f.yaml: ")
			}
			assert.ElementsMatch(t, tc.warnPaths, paths)
			if tc.spelling != "" {
				require.NotEmpty(t, warns)
				assert.Equal(t, tc.spelling, warns[0].Spelling)
				assert.Contains(t, warns[0].String(), "write it as:")
			}
		})
	}
}

func TestMigrateRejects(t *testing.T) {
	cases := []struct{ name, in, path, fix string }{
		{"single toleration without category", "tolerations: {key: k, operator: Exists}\n", "tolerations", "tolerations:\n      core:"},
		{"both spellings in one file", "nodeSelector: {core: {a: b}}\nnodeSelectors: {core: {c: d}}\n", "nodeSelector.core", "keep only nodeSelectors.core"},
		{"flat nodeSelector and nodeSelectors.core", "nodeSelector: {polyaxon: core}\nnodeSelectors: {core: {c: d}}\n", "nodeSelector", "keep only nodeSelectors.core"},
		{"nodeSelector keyed by what is not a category", "nodeSelector: {gpus: {a: b}}\n", "nodeSelector", "nodeSelectors.<category>"},
		{"mixed nodeSelector", "nodeSelector: {core: {a: b}, polyaxon: core}\n", "nodeSelector", "nodeSelectors.<category>"},
		{"category toleration not a toleration", "tolerations: {core: {foo: bar}}\n", "tolerations.core", "as a list"},
		{"old and new key together", "rbac: {enabled: true, create: false}\n", "rbac.enabled", "keep only rbac.create"},
		{"mixed affinity", "affinity: {nodeAffinity: {}, core: {}}\n", "affinity", "affinity.<category>"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := values.Migrate("f.yaml", parse(t, tc.in))
			require.Error(t, err)
			var me *values.MigrationError
			require.ErrorAs(t, err, &me)
			assert.Equal(t, tc.path, me.Path)
			assert.Contains(t, err.Error(), "f.yaml: "+tc.path)
			assert.Contains(t, err.Error(), tc.fix)
		})
	}
}

// A profile in the new spelling plus a user file in Polyaxon's documented spelling must not
// end up with both keys (the chart rejects that).
func TestBuildMixedSpellingsAcrossLayers(t *testing.T) {
	profile := parse(t, "nodeSelectors: {core: {polyaxon: core}, builds: {polyaxon: builds}}\n")
	f := writeFile(t, "guide.yaml", "nodeSelector:\n  core: {polyaxon: platform}\n")
	got, warns, err := values.BuildFiles("production", profile, values.Options{ValueFiles: []string{f}, Values: []string{"nodeSelector.jobs.pool=jobs"}})
	require.NoError(t, err)
	_, has := got["nodeSelector"]
	assert.False(t, has)
	assert.Equal(t, parse(t, "{core: {polyaxon: platform}, builds: {polyaxon: builds}, jobs: {pool: jobs}}"), got["nodeSelectors"])
	require.Len(t, warns, 2)
	assert.Equal(t, f, warns[0].Source)
	assert.Equal(t, "--set", warns[1].Source)
}
