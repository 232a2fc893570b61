package preflight

import (
	"context"
	"fmt"
	"strings"

	psaapi "k8s.io/pod-security-admission/api"
	psapolicy "k8s.io/pod-security-admission/policy"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/check"
)

// checkPodSecurity evaluates every rendered pod against the profile's Pod Security level with
// the pod-security-admission library itself (what the namespace label will enforce).
func (e *Env) checkPodSecurity(context.Context) (string, error) {
	levelName := e.Policy.PodSecurityLevel
	if levelName == "" {
		return "", check.Skip("the profile sets no Pod Security level")
	}
	level, err := psaapi.ParseLevel(levelName)
	if err != nil {
		return "", fmt.Errorf("profile policy.podSecurityLevel: %w", err)
	}
	eval, err := psapolicy.NewEvaluator(psapolicy.DefaultChecks(), nil)
	if err != nil {
		return "", fmt.Errorf("pod security evaluator: %w", err)
	}
	lv := psaapi.LevelVersion{Level: level, Version: psaapi.LatestVersion()}
	var failures []string
	n := 0
	for _, o := range e.objects() {
		name, pod := podOf(o)
		if pod == nil {
			continue
		}
		n++
		res := psapolicy.AggregateCheckResults(eval.EvaluatePod(lv, &pod.ObjectMeta, &pod.Spec))
		if !res.Allowed {
			var reasons []string
			for i, r := range res.ForbiddenReasons {
				if d := res.ForbiddenDetails[i]; d != "" {
					r += " (" + d + ")"
				}
				reasons = append(reasons, r)
			}
			failures = append(failures, fmt.Sprintf("%s violates %s: %s", name, levelName, strings.Join(reasons, "; ")))
		}
	}
	if n == 0 {
		return "", check.Skip("no pods rendered")
	}
	if len(failures) > 0 {
		return "", joinErrs(failures, 10)
	}
	return fmt.Sprintf("%d pod templates pass %s", n, levelName), nil
}
