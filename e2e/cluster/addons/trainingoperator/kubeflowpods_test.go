package trainingoperator

import (
	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster/local"
	"strings"
	"testing"
)

func TestKubeflowPodsCompleteStageParses(t *testing.T) {
	s, err := local.ParseStage(KubeflowPodsCompleteStage().YAML)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range KubeflowKinds {
		if !strings.Contains(s.YAML, "- "+k+"\n") {
			t.Errorf("stage does not select pods owned by a %s:\n%s", k, s.YAML)
		}
	}
}
