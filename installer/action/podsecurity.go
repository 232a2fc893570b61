package action

import (
	"fmt"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/preflight"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/profile"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/release"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/render"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/runs"
)

// PodSecurityOf is the profile's Pod Security level for the release namespace.
func PodSecurityOf(p *profile.Profile) release.PodSecurity {
	l := p.Policy.PodSecurityLevel
	return release.PodSecurity{Enforce: l, Audit: l, Warn: l}
}

// NamespacePodSecurity is the profile's Pod Security for the release namespace, except that
// enforce drops to "baseline" when the rendered release does not harden run pods (no admission
// policies: Kubernetes before 1.36, or runs.admissionPolicies.enabled=false): "restricted"
// would refuse every Polyaxon run. warn and audit keep the profile's level. The returned
// warning (empty when nothing was lowered) is for the user.
func NamespacePodSecurity(in *Inputs, rendered *render.Result, namespace string) (release.PodSecurity, string, error) {
	ps := PodSecurityOf(in.Profile)
	decl, err := runs.Load(in.Chart)
	if err != nil {
		return ps, "", err
	}
	enforce, err := preflight.NamespaceLevel(rendered, decl, namespace, ps.Enforce)
	if err != nil || enforce == ps.Enforce {
		return ps, "", err
	}
	warning := fmt.Sprintf("namespace %s enforces Pod Security %q (warn and audit %q): this release does not harden run pods, which %q would refuse (see check run-placement)",
		namespace, enforce, ps.Enforce, ps.Enforce)
	ps.Enforce = enforce
	return ps, warning, nil
}
