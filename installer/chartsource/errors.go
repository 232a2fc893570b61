package chartsource

import (
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sort"
	"strings"

	"helm.sh/helm/v3/pkg/registry"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/errdef"
	"oras.land/oras-go/v2/registry/remote/auth"
	"oras.land/oras-go/v2/registry/remote/errcode"
)

// Kinds of pull failures, to test with errors.Is.
var (
	// ErrNotFound: the registry has no such repository or version.
	ErrNotFound = errors.New("chart version not found")
	// ErrDenied: the registry refused the credentials (or there were none).
	ErrDenied = errors.New("registry refused the credentials")
	// ErrDigest: a pulled blob does not match its digest.
	ErrDigest = errors.New("chart archive does not match its digest")
	// ErrTLS: the registry's certificate could not be verified.
	ErrTLS = errors.New("registry certificate not trusted")
)

// DigestError is a chart archive whose content does not hash to its digest: refused.
type DigestError struct {
	Ref       string
	Want, Got string
}

func (e *DigestError) Error() string {
	return fmt.Sprintf("chart %s: %v: the manifest says %s, the archive pulled hashes to %s: the registry served altered or damaged content, so it was refused (fix: push the chart to the registry again, and check the mirror's storage)",
		e.Ref, ErrDigest, e.Want, e.Got)
}

func (e *DigestError) Is(target error) bool { return target == ErrDigest }

// PullError is a failed pull with what to do about it.
type PullError struct {
	Ref     string // as the user gave it
	Version string
	Kind    error // ErrNotFound, ErrDenied, ErrDigest, ErrTLS or nil
	Err     error
	Fix     string
}

func (e *PullError) Error() string {
	what := e.Ref
	if e.Version != "" {
		what += " version " + e.Version
	}
	msg := fmt.Sprintf("chart %s: ", what)
	if e.Kind != nil {
		msg += e.Kind.Error() + ": "
	}
	msg += e.Err.Error()
	if e.Fix != "" {
		msg += " (fix: " + e.Fix + ")"
	}
	return msg
}

func (e *PullError) Unwrap() []error {
	if e.Kind == nil {
		return []error{e.Err}
	}
	return []error{e.Kind, e.Err}
}

// explain turns a registry client error into a PullError that says what to fix.
func explain(o Options, err error, client *registry.Client) error {
	host := registryHost(o.Ref)
	pe := &PullError{Ref: o.Ref, Version: o.Version, Err: err}
	var resp *errcode.ErrorResponse
	var unknownCA x509.UnknownAuthorityError
	var certInvalid x509.CertificateInvalidError
	var hostname x509.HostnameError
	var opErr *net.OpError
	switch {
	case errors.Is(err, content.ErrMismatchedDigest), errors.Is(err, content.ErrTrailingData):
		pe.Kind = ErrDigest
		pe.Fix = "the registry served content that does not match the manifest, so it was refused: push the chart again, and check the mirror's storage"
	case errors.As(err, &resp) && (resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden),
		errors.Is(err, auth.ErrBasicCredentialNotFound):
		pe.Kind = ErrDenied
		cfg := "Helm's (~/.config/helm/registry/config.json) or Docker's"
		if o.Registry.Config != "" {
			cfg = o.Registry.Config
		}
		pe.Fix = fmt.Sprintf("the credentials for %s in %s were refused or missing: log in with `helm registry login %s --registry-config FILE` and pass --registry-config FILE", host, cfg, host)
	case errors.As(err, &resp) && resp.StatusCode == http.StatusNotFound, errors.Is(err, errdef.ErrNotFound),
		strings.Contains(strings.ToLower(err.Error()), "unable to locate any tags"),
		strings.Contains(strings.ToLower(err.Error()), "could not locate a version matching"):
		pe.Kind = ErrNotFound
		pe.Fix = notFoundFix(o, client)
	case errors.As(err, &unknownCA), errors.As(err, &certInvalid), errors.As(err, &hostname):
		pe.Kind = ErrTLS
		pe.Fix = fmt.Sprintf("pass the CA that signed %s's certificate with --ca-file (or, for a test registry only, --insecure-skip-tls-verify)", host)
	case errors.As(err, &opErr), strings.Contains(err.Error(), "server gave HTTP response to HTTPS client"):
		pe.Fix = fmt.Sprintf("check that %s is the registry's host:port and that it is up; a registry without TLS needs --plain-http", host)
	}
	return pe
}

// notFoundFix lists the versions the repository has, when the registry lets us see them.
func notFoundFix(o Options, client *registry.Client) string {
	tags, err := client.Tags(strings.TrimPrefix(o.Ref, registry.OCIScheme+"://"))
	if err != nil || len(tags) == 0 {
		return fmt.Sprintf("check the reference; push the chart there with `make package` and `helm push dist/polyaxon-VERSION.tgz oci://%s`", repoParent(o.Ref))
	}
	sort.Strings(tags)
	return fmt.Sprintf("pass --version with a version the registry has (%s), or push that version there", strings.Join(tags, ", "))
}

// registryHost is HOST of oci://HOST/PATH.
func registryHost(ref string) string {
	rest := strings.TrimPrefix(ref, registry.OCIScheme+"://")
	host, _, _ := strings.Cut(rest, "/")
	return host
}

// repoParent is HOST/PATH of oci://HOST/PATH/NAME (where `helm push` pushes to).
func repoParent(ref string) string {
	rest := strings.TrimPrefix(ref, registry.OCIScheme+"://")
	if i := strings.IndexAny(rest, "@"); i >= 0 {
		rest = rest[:i]
	}
	if i := strings.LastIndex(rest, "/"); i >= 0 {
		return rest[:i]
	}
	return rest
}
