package plan

// WithoutExactSearch leaves the verdicts to the bounds alone, as on a plan too large for the
// listing of placements, until restore is called. Tests of the bounds use it: on the small
// plans tests can afford, the exact listing would otherwise decide, and hide, every verdict
// the bounds leave open.
func WithoutExactSearch() (restore func()) {
	old := maxReachableWork
	maxReachableWork = 0
	return func() { maxReachableWork = old }
}
