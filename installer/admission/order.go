package admission

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apiserver/pkg/admission/plugin/policy/mutating"
)

// CheckOrderIndependent evaluates the pod with the policies in every order (forward and
// reverse only when there are more than 6) and fails when the result depends on it: the
// apiserver builds its policy list from a Go map (generic/policy_source.go), so the order
// of policies is not defined.
func (e *Evaluator) CheckOrderIndependent(ctx context.Context, pod *corev1.Pod) error {
	orders := permutations(len(e.hooks))
	var first *corev1.Pod
	for _, order := range orders {
		hooks := make([]mutating.PolicyHook, len(order))
		for i, j := range order {
			hooks[i] = e.hooks[j]
		}
		alt := *e
		alt.hooks = hooks
		got, err := alt.MutatePod(ctx, pod)
		if err != nil {
			return fmt.Errorf("policy order %v: %w", names(hooks), err)
		}
		if first == nil {
			first = got
		} else if !apiequality.Semantic.DeepEqual(first, got) {
			return fmt.Errorf("result depends on policy order: %v differs from %v", names(hooks), names(e.hooks))
		}
	}
	return nil
}

func names(hs []mutating.PolicyHook) []string {
	var out []string
	for _, h := range hs {
		out = append(out, h.Policy.Name)
	}
	return out
}

func permutations(n int) [][]int {
	id := make([]int, n)
	for i := range id {
		id[i] = i
	}
	if n > 6 {
		rev := make([]int, n)
		for i := range rev {
			rev[i] = n - 1 - i
		}
		return [][]int{id, rev}
	}
	var out [][]int
	var rec func(k int)
	rec = func(k int) {
		if k == n {
			out = append(out, append([]int(nil), id...))
			return
		}
		for i := k; i < n; i++ {
			id[k], id[i] = id[i], id[k]
			rec(k + 1)
			id[k], id[i] = id[i], id[k]
		}
	}
	rec(0)
	return out
}
