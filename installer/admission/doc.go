// Package admission predicts, without an API server, what the chart's MutatingAdmissionPolicies
// do to a pod: it runs k8s.io/apiserver's own policy dispatcher (matchConstraints, bindings,
// matchConditions, CEL mutations) over the rendered policies. `plan` and `check` place run pods
// with exactly the rules the API server applies, from the one place they are written: the chart.
// AdmitPod then runs the chart's ValidatingAdmissionPolicies over the mutated pod with the
// validating plugin's own dispatcher, as the server does after every mutation: a refusal is a
// *Refusal carrying the server's message.
//
// Offline it cannot reproduce the in-tree mutating plugins that run before the policies
// (DefaultTolerationSeconds, ServiceAccount, ...), the CEL authorizer (every check answers
// "no opinion"), or params (our policies take none). The e2e scenarios compare its prediction
// with a real kube-apiserver.
package admission
