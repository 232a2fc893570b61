package charts_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
)

// agentContainer is the agent pod's container of that name (nil for none).
func agentContainer(t *testing.T, r rendered, name string) *corev1.Container {
	t.Helper()
	for _, p := range r.pods(t) {
		if p.component != "agent" {
			continue
		}
		for i := range p.spec.Containers {
			if p.spec.Containers[i].Name == name {
				return &p.spec.Containers[i]
			}
		}
		return nil
	}
	t.Fatal("no agent pod")
	return nil
}

// Issue 53: a run whose pod the API server refuses is reported failed by a container of the
// agent's pod, with the agent's image and configuration, and nothing of the platform's more.
func TestAgentReportsRefusedRunPods(t *testing.T) {
	c := agentContainer(t, render(t, everything), "refusals")
	require.NotNil(t, c, "the agent pod has a refusals container")
	agent := agentContainer(t, render(t, everything), "agent")
	assert.Equal(t, agent.Image, c.Image, "the agent's image: Polyaxon's client and Kubernetes' are in it")
	require.Len(t, c.Command, 3)
	assert.Equal(t, []string{"python", "-c"}, c.Command[:2])
	assert.Contains(t, c.Command[2], "def is_refusal(", "files/refusals.py")
	assert.Equal(t, agent.EnvFrom, c.EnvFrom, "the agent's configuration: POLYAXON_HOST, POLYAXON_K8S_NAMESPACE")
	for _, e := range c.Env {
		assert.Nilf(t, e.ValueFrom, "%s: the refusals container reads no Secret", e.Name)
	}
	require.NotNil(t, c.SecurityContext)
	assert.True(t, *c.SecurityContext.ReadOnlyRootFilesystem)
	assert.False(t, strings.Contains(c.Command[2], "{{"), "the script is the file as it is, not a template")

	off := render(t, everything, map[string]any{"agent": map[string]any{"refusals": map[string]any{"enabled": false}}})
	assert.Nil(t, agentContainer(t, off, "refusals"), "agent.refusals.enabled=false")
}
