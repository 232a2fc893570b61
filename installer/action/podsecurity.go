package action

import (
	"context"
	"errors"
	"fmt"

	"helm.sh/helm/v3/pkg/chart"
	helmrelease "helm.sh/helm/v3/pkg/release"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	psapi "k8s.io/pod-security-admission/api"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/output"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/preflight"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/profile"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/release"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/render"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/runs"
)

// PodSecurityOf is the profile's Pod Security level for the release namespace.
func PodSecurityOf(p *profile.Profile) release.PodSecurity {
	return podSecurityAt(p.Policy.PodSecurityLevel)
}

func podSecurityAt(level string) release.PodSecurity {
	return release.PodSecurity{Enforce: level, Audit: level, Warn: level}
}

// NamespacePodSecurity is the profile's Pod Security for the release namespace, except that
// enforce drops to "baseline" when the rendered release does not harden run pods (no admission
// policies: Kubernetes before 1.36, or runs.admissionPolicies.enabled=false): "restricted"
// would refuse every Polyaxon run. warn and audit keep the profile's level. The returned
// warning (empty when nothing was lowered) is for the user.
func NamespacePodSecurity(in *Inputs, rendered *render.Result, namespace string) (release.PodSecurity, string, error) {
	return releasePodSecurity(in.Chart, rendered, namespace, PodSecurityOf(in.Profile))
}

func releasePodSecurity(ch *chart.Chart, rendered *render.Result, namespace string, ps release.PodSecurity) (release.PodSecurity, string, error) {
	decl, err := runs.Load(ch)
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

// RevisionPodSecurity is the namespace's Pod Security for a revision of the release, as install
// and upgrade set it for the release they apply: the level of the profile the revision was made
// with, enforce lowered to "baseline" when what the revision applied (its stored manifest) does
// not harden run pods. A revision without stored inputs (plain helm) keeps the namespace's warn
// level, which every polyaxon-deploy run sets to its profile's; no level at all, or a chart
// that declares no run categories, leaves the labels as they are. Warnings go to progress.
func RevisionPodSecurity(rc *release.Client, progress *output.Progress) release.RevisionPodSecurity {
	return func(ctx context.Context, rev *helmrelease.Release) (release.PodSecurity, error) {
		level, err := revisionLevel(ctx, rc, rev.Version)
		if err != nil || level == "" {
			return release.PodSecurity{}, err
		}
		if _, err := runs.Load(rev.Chart); err != nil {
			// A chart from before the run categories: what its runs need is unknown.
			progress.Warn(fmt.Sprintf("revision %d: %v: the namespace's Pod Security labels are left as they are", rev.Version, err))
			return release.PodSecurity{}, nil
		}
		rendered, err := render.Released(rev)
		if err != nil {
			return release.PodSecurity{}, err
		}
		ps, warning, err := releasePodSecurity(rev.Chart, rendered, rc.Namespace(), podSecurityAt(level))
		if warning != "" {
			progress.Warn(fmt.Sprintf("revision %d: %s", rev.Version, warning))
		}
		return ps, err
	}
}

// revisionLevel is the Pod Security level of the profile revision was made with.
func revisionLevel(ctx context.Context, rc *release.Client, revision int) (string, error) {
	in, _, err := rc.InputsFor(ctx, revision)
	if errors.Is(err, release.ErrNoInputs) {
		ns, err := rc.Kube().CoreV1().Namespaces().Get(ctx, rc.Namespace(), metav1.GetOptions{})
		if err != nil {
			return "", fmt.Errorf("namespace %s: %w", rc.Namespace(), err)
		}
		return ns.Labels[psapi.WarnLevelLabel], nil
	}
	if err != nil {
		return "", err
	}
	p, err := profileOf(in)
	if err != nil {
		return "", fmt.Errorf("the profile of revision %d: %w", revision, err)
	}
	return p.Policy.PodSecurityLevel, nil
}
