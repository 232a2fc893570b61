// Package contract reads what the chart declares once for every consumer: its components
// (charts/polyaxon/files/components.yaml) and the scheduling categories, core plus the run
// categories of files/run-categories.yaml (installer/runs).
package contract

import (
	"fmt"

	"helm.sh/helm/v3/pkg/chart"
	"sigs.k8s.io/yaml"

	"github.com/polyaxon-deploy/polyaxon-deploy/charts"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/runs"
)

// ComponentsFile is the chart file that declares the components.
const ComponentsFile = "files/components.yaml"

// CoreCategory is the scheduling category of every core component and chart Job.
const CoreCategory = "core"

// RoleLabel marks core pods (value "core"): the chart sets it from the declaration, so a
// rendered pod says itself whether it is core.
const RoleLabel = "polyaxon.com/role"

// Components are the chart's components by kind.
type Components struct {
	Core         []string `json:"core"`
	Dependencies []string `json:"dependencies"`
}

// IsDependency reports whether name is a dependency (Postgres, RabbitMQ, Redis).
func (c Components) IsDependency(name string) bool { return contains(c.Dependencies, name) }

// IsCore reports whether name is a core component.
func (c Components) IsCore(name string) bool { return contains(c.Core, name) }

// LoadComponents reads the declaration from a chart.
func LoadComponents(ch *chart.Chart) (Components, error) {
	for _, f := range ch.Files {
		if f.Name == ComponentsFile {
			return parseComponents(f.Data)
		}
	}
	return Components{}, fmt.Errorf("chart %s has no %s", ch.Name(), ComponentsFile)
}

// EmbeddedComponents is the declaration of the chart built into the binary.
func EmbeddedComponents() Components {
	data, err := charts.ReadFile(ComponentsFile)
	if err != nil {
		panic("embedded chart has no " + ComponentsFile + ": " + err.Error())
	}
	c, err := parseComponents(data)
	if err != nil {
		panic("embedded chart: " + err.Error())
	}
	return c
}

func parseComponents(data []byte) (Components, error) {
	var c Components
	if err := yaml.UnmarshalStrict(data, &c); err != nil {
		return c, fmt.Errorf("%s: %w", ComponentsFile, err)
	}
	if len(c.Core) == 0 {
		return c, fmt.Errorf("%s: no core component", ComponentsFile)
	}
	return c, nil
}

// SchedulingCategories are the keys of nodeSelectors, tolerations and affinity: core and the
// run categories of the embedded chart, in declaration order.
func SchedulingCategories() []string {
	return append([]string{CoreCategory}, runs.Embedded().Names()...)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
