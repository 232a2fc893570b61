package render

import (
	"errors"
	"fmt"

	"helm.sh/helm/v3/pkg/chartutil"
	helmrelease "helm.sh/helm/v3/pkg/release"
)

// Released is what a Helm revision applied, as a Result: the objects of its stored manifest
// and hooks (what the cluster got, whatever this installer would render today) and the values
// its templates saw (the revision's chart defaults under its user values).
func Released(rel *helmrelease.Release) (*Result, error) {
	if rel == nil || rel.Chart == nil {
		return nil, errors.New("a revision without its chart")
	}
	vals, err := chartutil.CoalesceValues(rel.Chart, rel.Config)
	if err != nil {
		return nil, fmt.Errorf("revision %d's values: %w", rel.Version, err)
	}
	res := &Result{Values: vals.AsMap()}
	source := fmt.Sprintf("revision %d", rel.Version)
	for _, doc := range splitDocs(rel.Manifest) {
		mf, err := decodeManifest(source, doc)
		if errors.Is(err, errEmpty) {
			continue
		}
		if err != nil {
			return nil, err
		}
		res.Manifests = append(res.Manifests, mf)
	}
	if res.Hooks, err = decodeHooks(source+" hook ", rel.Hooks); err != nil {
		return nil, err
	}
	return res, nil
}
