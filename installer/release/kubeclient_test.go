package release

import (
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/kube"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/resource"
)

func info(kind, name string) *resource.Info {
	return &resource.Info{Name: name, Namespace: "ns", Mapping: &meta.RESTMapping{
		GroupVersionKind: schema.GroupVersionKind{Group: "admissionregistration.k8s.io", Version: "v1", Kind: kind}}}
}

// recordingKube records the lists Helm's Update is given, and whether Build was asked to
// validate.
type recordingKube struct {
	kube.Interface
	original, target kube.ResourceList
	validated        []bool
}

func (r *recordingKube) Build(_ io.Reader, validate bool) (kube.ResourceList, error) {
	r.validated = append(r.validated, validate)
	return nil, nil
}

func (r *recordingKube) Update(original, target kube.ResourceList, _ bool) (*kube.Result, error) {
	r.original, r.target = original, target
	return &kube.Result{}, nil
}

// A rollback's target objects that the current revision lacks are their own baselines: Helm
// then patches one an interrupted run left in the cluster from what it renders, not from its
// live state (whose patch drops the resourceVersion admission policies need).
func TestUpdateGivesHelmATargetBaselineForObjectsTheCurrentRevisionLacks(t *testing.T) {
	kept := info("MutatingAdmissionPolicy", "security")
	current := kube.ResourceList{kept, info("Deployment", "gateway")}
	rendered := info("MutatingAdmissionPolicy", "security")
	leftOver := info("ValidatingAdmissionPolicyBinding", "restrictions")
	target := kube.ResourceList{rendered, leftOver}

	rec := &recordingKube{}
	k := &ctxKubeClient{Interface: rec, ctx: t.Context()}
	_, err := k.Update(current, target, false)
	require.NoError(t, err)
	require.Len(t, rec.original, 3)
	assert.Same(t, kept, rec.original.Get(rendered), "an object of the current revision keeps its own baseline")
	assert.Same(t, leftOver, rec.original.Get(leftOver), "an object the current revision lacks is its own baseline")
	assert.Equal(t, target, rec.target)
	assert.Len(t, current, 2, "the caller's list is left alone")
	assert.Empty(t, rec.original.Difference(target).Difference(current), "nothing more is deleted than before")

	_, err = k.UpdateThreeWayMerge(current, target, false)
	require.NoError(t, err)
	assert.Same(t, leftOver, rec.original.Get(leftOver), "the three-way merge gets the same baselines")
}

// Helm asks for OpenAPI validation of every release manifest and hook; on the servers the chart
// supports it validates nothing (the server does) after decoding the OpenAPI v3 documents,
// seconds of CPU per install or upgrade. The kube client never passes it on.
func TestBuildSkipsHelmsOpenAPIValidation(t *testing.T) {
	rec := &recordingKube{}
	k := &ctxKubeClient{Interface: rec, ctx: t.Context()}
	_, err := k.Build(strings.NewReader(""), true)
	require.NoError(t, err)
	_, err = k.BuildTable(strings.NewReader(""), true)
	require.NoError(t, err)
	assert.Equal(t, []bool{false, false}, rec.validated)
}
