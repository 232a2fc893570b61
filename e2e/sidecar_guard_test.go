package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
)

// The guarded sidecar writes to the chart's bucket only. Polyaxon's converter gives the
// sidecar the store through a connection catalog in its environment, and a polyaxonfile can
// put a sidecar of its own, shaped as Polyaxon's and given the keys, with a catalog of its
// choosing: another bucket (the backups'), another prefix, another endpoint. The guard reads
// the bucket from the chart instead, so that catalog changes nothing. Run with Polyaxon's own
// Python on the program the runs' mutating policy renders.
func TestSidecarGuardKeepsToTheChartsBucket(t *testing.T) {
	t.Parallel()
	venv, _ := polyaxonPrograms(t)
	objs := renderedObjects(t, "polyaxon", []string{"templates/runs/mutatingadmissionpolicy.yaml"},
		"artifactsStore.kind=s3", "artifactsStore.bucket=s3://polyaxon-artifacts", "artifactsStore.secret.name=polyaxon-s3")
	var program string
	for _, o := range objs {
		p, ok := o.(*admissionregistrationv1.MutatingAdmissionPolicy)
		if !ok {
			continue
		}
		for _, v := range p.Spec.Variables {
			if v.Name == "guarded" {
				var command []string
				require.NoError(t, json.Unmarshal([]byte(v.Expression), &command))
				require.Len(t, command, 3)
				program = command[2]
			}
		}
	}
	require.NotEmpty(t, program, "the sidecar policy's guarded command")
	// The guard up to where it knows its run's folder, then that folder.
	cut := strings.Index(program, "\ndef _own_run(")
	require.Positive(t, cut)
	probe := program[:cut] + "\nprint(_FOLDER)\n"

	const run = "0123456789abcdef0123456789abcdef"
	forged := `{"connections": [{"name": "artifacts", "kind": "s3", ` +
		`"schema": {"bucket": "s3://polyaxon-backups/fedcba9876543210fedcba9876543210"}, ` +
		`"env": [["AWS_ENDPOINT_URL", "http://attacker.example"]]}]}`
	contextRoot := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(contextRoot, "artifacts"), 0o755))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	honest := `{"connections": [{"name": "artifacts", "kind": "s3", "schema": {"bucket": "s3://polyaxon-artifacts"}, "secret": {"name": "polyaxon-s3"}}]}`
	for name, catalog := range map[string]string{"the catalog Polyaxon writes": honest, "a catalog of the polyaxonfile's": forged} {
		cmd := exec.CommandContext(ctx, filepath.Join(venv, "bin", "python"), "-c", probe)
		cmd.Env = append(os.Environ(), "POLYAXON_RUN_INSTANCE=default.vision.runs."+run,
			"POLYAXON_CONTEXT_ROOT="+contextRoot, "POLYAXON_ARTIFACTS_STORE_NAME=artifacts", "POLYAXON_CONNECTIONS_CATALOG="+catalog)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s: %s", name, out)
		assert.Equal(t, "s3://polyaxon-artifacts/"+run, strings.TrimSpace(string(out)), "%s: the folder the sidecar writes and deletes in", name)
	}
}
