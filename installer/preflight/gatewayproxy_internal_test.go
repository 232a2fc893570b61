package preflight

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/polyaxon-deploy/polyaxon-deploy/charts"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/profile"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/render"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/values"
)

// renderedGateway is the gateway's Deployment and Service as the chart renders them with the
// production profile: the check and the chart cannot drift apart.
func renderedGateway(t *testing.T) (*appsv1.Deployment, *corev1.Service) {
	t.Helper()
	ch, err := render.LoadFS(charts.FS, charts.Root)
	require.NoError(t, err)
	prof, err := profile.Load("production")
	require.NoError(t, err)
	vals, _, err := values.BuildFiles(prof.Name, prof.Values, values.Options{})
	require.NoError(t, err)
	res, err := render.Render(ch, vals, render.Options{ReleaseName: "polyaxon", Namespace: "polyaxon"})
	require.NoError(t, err)
	var dep *appsv1.Deployment
	var svc *corev1.Service
	for _, o := range res.Objects() {
		var d appsv1.Deployment
		var s corev1.Service
		switch {
		case asTyped(o, "Deployment", &d) && d.Labels[render.LabelComponent] == gatewayComponent:
			dep = &d
		case asTyped(o, "Service", &s) && s.Labels[render.LabelComponent] == gatewayComponent:
			svc = &s
		}
	}
	require.NotNil(t, dep, "the chart renders the gateway's Deployment")
	require.NotNil(t, svc, "the chart renders the gateway's Service")
	return dep, svc
}

// container finds the rendered container name (the chart's: gateway, streams, proxy).
func container(t *testing.T, d *appsv1.Deployment, name string) *corev1.Container {
	t.Helper()
	for i := range d.Spec.Template.Spec.Containers {
		if c := &d.Spec.Template.Spec.Containers[i]; c.Name == name {
			return c
		}
	}
	t.Fatalf("Deployment %s has no container %q", d.Name, name)
	return nil
}

// Each case breaks one thing of the chart's gateway; every problem names the object.
func TestGatewayProxyProblems(t *testing.T) {
	target := func(p intstr.IntOrString) func(*testing.T, *appsv1.Deployment, *corev1.Service) {
		return func(_ *testing.T, _ *appsv1.Deployment, s *corev1.Service) { s.Spec.Ports[0].TargetPort = p }
	}
	cases := []struct {
		name   string
		mutate func(t *testing.T, d *appsv1.Deployment, s *corev1.Service)
		noSvc  bool
		want   []string // one substring per problem, in order
	}{
		{name: "the chart's production gateway passes"},
		{name: "a numeric targetPort of nginx's port passes", mutate: target(intstr.FromInt32(8000))},
		{name: "nginx by its path passes", mutate: func(t *testing.T, d *appsv1.Deployment, _ *corev1.Service) {
			container(t, d, "proxy").Command[0] = "/usr/sbin/nginx"
		}},
		{name: "no nginx in front", mutate: func(t *testing.T, d *appsv1.Deployment, _ *corev1.Service) {
			container(t, d, "proxy").Command = []string{"caddy", "run"}
		}, want: []string{
			"Deployment polyaxon-gateway: no container runs nginx (a command starting with nginx)",
			`Service polyaxon-gateway: port "http" targets port "http", which container "proxy" of Deployment polyaxon-gateway declares`,
			`Service polyaxon-gateway: port "runs" targets port "runs", which container "proxy" of Deployment polyaxon-gateway declares`,
		}},
		{name: "haupt's API on every address", mutate: func(t *testing.T, d *appsv1.Deployment, _ *corev1.Service) {
			container(t, d, "gateway").Args[0] = "0.0.0.0"
		}, want: []string{`Deployment polyaxon-gateway: container "gateway" runs haupt (python -c) on 0.0.0.0, not 127.0.0.1: its port is reachable from other pods, runs among them`}},
		{name: "haupt's streams on the pod's address", mutate: func(t *testing.T, d *appsv1.Deployment, _ *corev1.Service) {
			container(t, d, "streams").Args[0] = "10.0.0.7"
		}, want: []string{`Deployment polyaxon-gateway: container "streams" runs haupt (python -c) on 10.0.0.7, not 127.0.0.1`}},
		{name: "haupt's address written in the command", mutate: func(t *testing.T, d *appsv1.Deployment, _ *corev1.Service) {
			c := container(t, d, "gateway")
			c.Command = append(c.Command, "0.0.0.0", "8001")
			c.Args = nil
		}, want: []string{`container "gateway" runs haupt (python -c) on 0.0.0.0`}},
		{name: "haupt without an address", mutate: func(t *testing.T, d *appsv1.Deployment, _ *corev1.Service) {
			container(t, d, "streams").Args = nil
		}, want: []string{`Deployment polyaxon-gateway: container "streams" runs haupt (python -c) with no address to listen on`}},
		{name: "another container declares the Service's port", mutate: func(t *testing.T, d *appsv1.Deployment, _ *corev1.Service) {
			container(t, d, "gateway").Ports[0].Name = "http"
		}, want: []string{`Service polyaxon-gateway: port "http" targets port "http", which container "gateway" of Deployment polyaxon-gateway declares: the Service reaches it without nginx`}},
		{name: "nginx mounts no ConfigMap", mutate: func(t *testing.T, d *appsv1.Deployment, _ *corev1.Service) {
			c := container(t, d, "proxy")
			var kept []corev1.VolumeMount
			for _, m := range c.VolumeMounts {
				if m.Name != "proxy-config" {
					kept = append(kept, m)
				}
			}
			require.Len(t, kept, len(c.VolumeMounts)-1)
			c.VolumeMounts = kept
		}, want: []string{`Deployment polyaxon-gateway: the nginx container "proxy" mounts no ConfigMap`}},
		{name: "nginx's config from an emptyDir", mutate: func(t *testing.T, d *appsv1.Deployment, _ *corev1.Service) {
			for i, v := range d.Spec.Template.Spec.Volumes {
				if v.Name == "proxy-config" {
					d.Spec.Template.Spec.Volumes[i].VolumeSource = corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}
				}
			}
		}, want: []string{`the nginx container "proxy" mounts no ConfigMap`}},
		{name: "the Service targets haupt's API by name", mutate: target(intstr.FromString("api")),
			want: []string{`Service polyaxon-gateway: port "http" targets port "api", which container "gateway" of Deployment polyaxon-gateway declares`}},
		{name: "the Service targets haupt's streams by number", mutate: target(intstr.FromInt32(8002)),
			want: []string{`Service polyaxon-gateway: port "http" targets port 8002, which container "streams" of Deployment polyaxon-gateway declares`}},
		{name: "the Service targets a port no container declares", mutate: target(intstr.FromString("web")),
			want: []string{`Service polyaxon-gateway: port "http" targets port "web", which the nginx container "proxy" of Deployment polyaxon-gateway does not declare`}},
		{name: "the Service targets a number nginx does not declare", mutate: target(intstr.FromInt32(9000)),
			want: []string{`targets port 9000, which the nginx container "proxy" of Deployment polyaxon-gateway does not declare`}},
		{name: "no Service selects the gateway", noSvc: true,
			want: []string{"Deployment polyaxon-gateway: no Service of the gateway selects its pods"}},
	}
	dep, svc := renderedGateway(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d, s := dep.DeepCopy(), svc.DeepCopy()
			if tc.mutate != nil {
				tc.mutate(t, d, s)
			}
			if tc.noSvc {
				s = nil
			}
			got := gatewayProxyProblems(d, s)
			require.Len(t, got, len(tc.want), "%q", got)
			for i, w := range tc.want {
				assert.Contains(t, got[i], w)
			}
		})
	}
}

// The chart's gateway is what the check expects of it, so that a passing case above is the
// chart's and not an accident of the fixture.
func TestRenderedGatewayIsNginxInFrontOfHaupt(t *testing.T) {
	d, s := renderedGateway(t)
	assert.Equal(t, "nginx", container(t, d, "proxy").Command[0])
	for _, name := range []string{"gateway", "streams"} {
		host, ok := hauptAddress(*container(t, d, name))
		assert.True(t, ok, "%s runs haupt", name)
		assert.Equal(t, hauptHost, host, name)
	}
	require.Len(t, s.Spec.Ports, 2, "users' and runs' ports")
	assert.Equal(t, intstr.FromString("http"), s.Spec.Ports[0].TargetPort)
	assert.Equal(t, intstr.FromString("runs"), s.Spec.Ports[1].TargetPort)
}
