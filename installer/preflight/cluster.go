package preflight

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/kubernetes"

	"github.com/polyaxon-deploy/polyaxon-deploy/installer/check"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/render"
)

func isNotFound(err error) bool { return apierrors.IsNotFound(err) }

func serverVersion(ctx context.Context, cs kubernetes.Interface) (*version.Info, error) {
	type result struct {
		v   *version.Info
		err error
	}
	ch := make(chan result, 1)
	// Discovery's ServerVersion takes no context; bound it by ctx anyway.
	go func() {
		v, err := cs.Discovery().ServerVersion()
		ch <- result{v, err}
	}()
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
		return nil, fmt.Errorf("API server did not answer: %w", ctx.Err())
	}
}

func (e *Env) checkAPI(ctx context.Context) (string, error) {
	v, err := e.version(ctx)
	if err != nil {
		return "", fmt.Errorf("cannot reach the Kubernetes API: %w", err)
	}
	return "Kubernetes " + v.GitVersion, nil
}

func (e *Env) checkVersion(ctx context.Context) (string, error) {
	v, err := e.version(ctx)
	if err != nil {
		return "", err
	}
	if e.Chart == nil || e.Chart.Metadata.KubeVersion == "" {
		return "", check.Skip("the chart declares no kubeVersion range")
	}
	constraint := e.Chart.Metadata.KubeVersion
	if !render.KubeVersionOK(constraint, v.GitVersion) {
		return "", fmt.Errorf("server is %s; chart %s requires %s", v.GitVersion, e.Chart.Metadata.Version, constraint)
	}
	return fmt.Sprintf("%s is in %s", v.GitVersion, constraint), nil
}

// checkReleaseState reads Helm's release records (Secrets labelled owner=helm,name=<release>,
// the default storage driver) and looks at the newest revision.
func (e *Env) checkReleaseState(ctx context.Context) (string, error) {
	cs, err := e.clientset()
	if err != nil {
		return "", err
	}
	list, err := cs.CoreV1().Secrets(e.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "owner=helm,name=" + e.Release})
	if err != nil {
		if apierrors.IsForbidden(err) {
			return "", fmt.Errorf("cannot list Helm release records (Secrets) in %s: %w", e.Namespace, err)
		}
		return "", fmt.Errorf("listing Helm release records in %s: %w", e.Namespace, err)
	}
	type rev struct {
		n      int
		status string
	}
	var revs []rev
	for _, s := range list.Items {
		n, _ := strconv.Atoi(s.Labels["version"])
		revs = append(revs, rev{n, s.Labels["status"]})
	}
	if len(revs) == 0 {
		return fmt.Sprintf("no release %s in %s yet (install)", e.Release, e.Namespace), nil
	}
	sort.Slice(revs, func(i, j int) bool { return revs[i].n > revs[j].n })
	last := revs[0]
	if strings.HasPrefix(last.status, "pending-") {
		return "", fmt.Errorf("release %s revision %d is %s: another operation is running or crashed", e.Release, last.n, last.status)
	}
	if last.status == "failed" {
		return "", check.Warnf("release %s revision %d is failed; the next upgrade replaces it (or roll back first)", e.Release, last.n)
	}
	return fmt.Sprintf("release %s revision %d is %s", e.Release, last.n, last.status), nil
}

// joinErrs joins up to max messages, then says how many more.
func joinErrs(errs []string, max int) error {
	if len(errs) == 0 {
		return nil
	}
	if len(errs) > max {
		more := len(errs) - max
		errs = append(errs[:max:max], fmt.Sprintf("... and %d more", more))
	}
	return errors.New(strings.Join(errs, "\n"))
}
