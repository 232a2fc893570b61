package release

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	psapi "k8s.io/pod-security-admission/api"
)

// PodSecurity is the Pod Security Admission policy a profile asks for on the release namespace.
// Empty levels are not labelled.
type PodSecurity struct {
	Enforce string `json:"enforce,omitempty"`
	Audit   string `json:"audit,omitempty"`
	Warn    string `json:"warn,omitempty"`
	// Version pins the policy version ("latest" when empty).
	Version string `json:"version,omitempty"`
}

// Labels returns the pod-security.kubernetes.io/* labels, validating levels and version with the
// admission plugin's own parsers.
func (p PodSecurity) Labels() (map[string]string, error) {
	version := p.Version
	if version == "" {
		version = "latest"
	}
	if _, err := psapi.ParseVersion(version); err != nil {
		return nil, fmt.Errorf("pod security version %q: %w", version, err)
	}
	labels := map[string]string{}
	for _, m := range []struct{ level, levelLabel, versionLabel string }{
		{p.Enforce, psapi.EnforceLevelLabel, psapi.EnforceVersionLabel},
		{p.Audit, psapi.AuditLevelLabel, psapi.AuditVersionLabel},
		{p.Warn, psapi.WarnLevelLabel, psapi.WarnVersionLabel},
	} {
		if m.level == "" {
			continue
		}
		if _, err := psapi.ParseLevel(m.level); err != nil {
			return nil, fmt.Errorf("label %s: %w (use privileged, baseline or restricted)", m.levelLabel, err)
		}
		labels[m.levelLabel] = m.level
		labels[m.versionLabel] = version
	}
	return labels, nil
}

// CreateNamespace creates the release namespace with the Pod Security labels when it does not
// exist, and leaves an existing one as it is: the release lock lives in the namespace, and the
// labels of a namespace that may already hold a release change only under that lock
// (EnsureNamespace).
func (c *Client) CreateNamespace(ctx context.Context, ps PodSecurity) (created bool, err error) {
	labels, err := ps.Labels()
	if err != nil {
		return false, err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: c.namespace, Labels: labels}}
	_, err = c.kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
	switch {
	case err == nil:
		return true, nil
	case apierrors.IsAlreadyExists(err):
		return false, nil
	default:
		return false, fmt.Errorf("namespace %s: %w", c.namespace, err)
	}
}

// EnsureNamespace creates the release namespace with the Pod Security labels, or sets the labels
// on an existing namespace (the profile is the policy; a changed level is reported).
func (c *Client) EnsureNamespace(ctx context.Context, ps PodSecurity) (created bool, err error) {
	labels, err := ps.Labels()
	if err != nil {
		return false, err
	}
	nss := c.kube.CoreV1().Namespaces()
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		ns, err := nss.Get(ctx, c.namespace, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			ns = &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: c.namespace, Labels: labels}}
			if _, err = nss.Create(ctx, ns, metav1.CreateOptions{}); err != nil {
				return err
			}
			created = true
			return nil
		}
		if err != nil {
			return err
		}
		changed := false
		if ns.Labels == nil {
			ns.Labels = map[string]string{}
		}
		for k, v := range labels {
			if old, ok := ns.Labels[k]; ok && old != v {
				c.progress("namespace %s: label %s changed from %q to %q (profile policy)", c.namespace, k, old, v)
			}
			if ns.Labels[k] != v {
				ns.Labels[k] = v
				changed = true
			}
		}
		if !changed {
			return nil
		}
		_, err = nss.Update(ctx, ns, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return false, fmt.Errorf("namespace %s: %w", c.namespace, err)
	}
	return created, nil
}

// levelRank orders Pod Security levels from the least to the most restrictive.
var levelRank = map[psapi.Level]int{psapi.LevelPrivileged: 0, psapi.LevelBaseline: 1, psapi.LevelRestricted: 2}

// LowerEnforce sets ps's labels now when ps enforces a less restrictive level than the
// namespace does: before an apply that takes the run pods' hardening away, so that the run
// pods created meanwhile are admitted. Raising a level waits for the apply (EnsureNamespace
// after it). It reports whether it relabelled.
func (c *Client) LowerEnforce(ctx context.Context, ps PodSecurity) (bool, error) {
	lower, err := c.LowersEnforce(ctx, ps)
	if err != nil || !lower {
		return false, err
	}
	if _, err := c.EnsureNamespace(ctx, ps); err != nil {
		return false, err
	}
	return true, nil
}

// LowersEnforce reports whether ps enforces a less restrictive level than the namespace does
// now (false when the namespace or its label is missing, or ps enforces nothing).
func (c *Client) LowersEnforce(ctx context.Context, ps PodSecurity) (bool, error) {
	if ps.Enforce == "" {
		return false, nil
	}
	want, err := psapi.ParseLevel(ps.Enforce)
	if err != nil {
		return false, fmt.Errorf("label %s: %w (use privileged, baseline or restricted)", psapi.EnforceLevelLabel, err)
	}
	ns, err := c.kube.CoreV1().Namespaces().Get(ctx, c.namespace, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("namespace %s: %w", c.namespace, err)
	}
	cur, err := psapi.ParseLevel(ns.Labels[psapi.EnforceLevelLabel])
	if err != nil {
		return false, nil // no (or no valid) enforce label: nothing is lowered
	}
	return levelRank[want] < levelRank[cur], nil
}
