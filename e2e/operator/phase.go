package operator

import "strings"

// Phase is a run's state as the operator records it: the type of the resource's latest
// condition (mloperator api/v1/condition.go).
type Phase string

const (
	Pending  Phase = "" // nothing created yet
	Starting Phase = "Starting"
	// Unschedulable: a pod of the run cannot be placed (the scheduler's reason in the message).
	Unschedulable Phase = "Unschedulable"
	Running       Phase = "Running"
	Succeeded     Phase = "Succeeded"
	Failed        Phase = "Failed"
	Stopped       Phase = "Stopped"
)

// Done says whether p is final: nothing changes a finished run.
func (p Phase) Done() bool { return p == Succeeded || p == Failed || p == Stopped }

// Status is p as Polyaxon's API names it (lowercase V1Statuses, polyaxon _schemas/lifecycle.py).
func (p Phase) Status() string { return strings.ToLower(string(p)) }

// after says whether p comes after q: a run only moves forward.
func (p Phase) after(q Phase) bool { return rank(p) > rank(q) }

func rank(p Phase) int {
	switch p {
	case Starting:
		return 1
	case Unschedulable:
		return 2
	case Running:
		return 3
	case Succeeded, Failed, Stopped:
		return 4
	}
	return 0
}
