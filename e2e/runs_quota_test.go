package e2e

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster"
	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster/local"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/admission"
	"github.com/polyaxon-deploy/polyaxon-deploy/installer/plan"
)

// TestRunsQuota (issue 53, item 2: a quota for runs): `install --profile production` on the
// local provider (a real kube-apiserver, the demo's node pools) sizes the runs' quota from the
// run pools `plan` showed beforehand (experiments and builds: 40 CPU, 144Gi, 300Gi of disk,
// 330 pods, 8 GPUs; a container at most one node's 16 CPU, 64Gi, 100Gi), and the API server
// holds runs to it: a run pod without resources gets the LimitRange's defaults, and a request
// above a default limit becomes its limit; every emptyDir gets a size (Polyaxon's /dev/shm the
// memory one); one above its bound is refused with the reason `plan` and `check` predict; no
// LoadBalancer or NodePort Service may be made in the runs' namespace; a pod asking for more
// CPU than all runs may hold is refused with the quota's message. A run through Polyaxon's own
// CLI still succeeds, its pod bounded the same way.
func TestRunsQuota(t *testing.T) {
	sideBySide(t, realPrograms) // a cluster of its own and Polyaxon's programs (package doc)
	ns, runs := nsInstall, nsRuns
	c := polyaxonCluster(t, "quota", ns)
	venv, _ := polyaxonPrograms(t)
	createNamespace(t, c, ns)
	values := []string{"--set", c.postgresPasswordValue(), "--set", "scheduler.enabled=false", "--set", "redis.enabled=false",
		"--set", "artifactsStore.persistence.sharedVolume.hostPath.path=" + t.TempDir()}

	var planned struct {
		RunsQuota *plan.RunsQuota `json:"runsQuota"`
	}
	c.deploy(t, append([]string{"plan", "--profile", "production", "--namespace", ns, "-o", "json"}, values...)...).requireExit(t, 0).data(t, &planned)
	require.NotNil(t, planned.RunsQuota, "plan prints the runs' quota it would render")
	assert.Equal(t, []plan.PoolCount{{Pool: "polyaxon=builds", Nodes: 1}, {Pool: "polyaxon=experiments", Nodes: 2}}, planned.RunsQuota.SizedFrom)
	install := c.deploy(t, append([]string{"install", "--profile", "production", "--namespace", ns}, values...)...).requireExit(t, 0)
	assert.Contains(t, install.Stderr, "runs' quota sized from the run pools polyaxon=builds (1 node), polyaxon=experiments (2 nodes): pods 330, cpu 40, memory 144Gi, ephemeral-storage 300Gi, nvidia.com/gpu 8; the quota twice that")
	requireWorkloadsReady(t, c.Clientset, ns, 3*time.Minute)
	cs, _ := warnedClient(t, c)

	t.Run("the quota and the LimitRange are sized from the run pools, as plan said", func(t *testing.T) {
		q, err := cs.CoreV1().ResourceQuotas(runs).Get(ctxT(t, time.Minute), releaseName+"-runs", metav1.GetOptions{})
		require.NoError(t, err)
		b, _ := yaml.Marshal(q.Status)
		t.Logf("its status once installed:\n%s", b)
		l, err := cs.CoreV1().LimitRanges(runs).Get(ctxT(t, time.Minute), releaseName+"-runs", metav1.GetOptions{})
		require.NoError(t, err)
		for _, o := range []any{q.Spec, l.Spec} {
			b, _ := yaml.Marshal(o)
			t.Logf("%T:\n%s", o, b)
		}
		hard := quantityMap(q.Spec.Hard)
		for k, v := range map[string]string{"pods": "660", "requests.cpu": "80", "requests.memory": "288Gi",
			"requests.ephemeral-storage": "600Gi", "requests.nvidia.com/gpu": "16",
			"services.loadbalancers": "0", "services.nodeports": "0", "count/jobs.polyaxon.com": "500", "count/jobs.batch": "500"} {
			assert.Equal(t, v, hard[k], k)
		}
		assert.Equal(t, planned.RunsQuota.Hard, hard, "plan said what install rendered")
		require.Len(t, l.Spec.Limits, 2)
		assert.Equal(t, map[string]string{"cpu": "16", "memory": "64Gi", "ephemeral-storage": "100Gi"}, quantityMap(l.Spec.Limits[0].Max), "one run-pool node's allocatable")
		assert.Equal(t, planned.RunsQuota.Max, quantityMap(l.Spec.Limits[0].Max))
		// Admission enforces a quota once the quota controller has counted each of its
		// resources; until then a create it bounds is refused ("status unknown for quota"). The
		// run objects' kinds are as new as the quota: install made the controller count them
		// (else at its resync, 5 minutes later).
		assert.NotContains(t, install.Stderr, "does not count", "install saw the quota count everything")
		assert.Equal(t, len(q.Spec.Hard), len(q.Status.Used), "every resource of the quota is counted once install returns: %v", q.Status.Used)
	})

	dryRun := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	ev := offlineAdmitter(t, ns)
	policy := ns + "-" + releaseName + "-runs-restrictions"
	denied := "ValidatingAdmissionPolicy '" + policy + "' with binding '" + policy + "' denied request: "

	t.Run("a run pod without resources gets the defaults, and each of its emptyDirs a size", func(t *testing.T) {
		pod := loadRunPod(t, "job.yaml", runs)
		for i := range pod.Spec.InitContainers {
			pod.Spec.InitContainers[i].Resources = corev1.ResourceRequirements{}
		}
		for i := range pod.Spec.Containers {
			pod.Spec.Containers[i].Resources = corev1.ResourceRequirements{}
		}
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: "shm", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}})
		got, err := cs.CoreV1().Pods(runs).Create(ctxT(t, time.Minute), pod, dryRun)
		require.NoError(t, err, "a run pod that asks for nothing is admitted")
		for _, ctr := range append(got.Spec.InitContainers, got.Spec.Containers...) {
			assert.Equal(t, map[string]string{"cpu": "100m", "memory": "256Mi", "ephemeral-storage": "256Mi"}, quantityMap(ctr.Resources.Requests), ctr.Name)
			assert.Equal(t, map[string]string{"cpu": "16", "memory": "64Gi", "ephemeral-storage": "100Gi"}, quantityMap(ctr.Resources.Limits), ctr.Name+": no default limit, so the max (the largest run-pool node)")
		}
		assert.Equal(t, map[string]string{"artifacts-context": "50Gi", "configs-context": "50Gi", "shm": "8Gi"}, emptyDirSizes(got))

		// A polyaxonfile that sets only requests: admitted, limited by the max.
		pod = loadRunPod(t, "job.yaml", runs)
		pod.Spec.Containers[0].Resources = corev1.ResourceRequirements{Requests: corev1.ResourceList{
			"cpu": resource.MustParse("4"), "memory": resource.MustParse("8Gi"), "ephemeral-storage": resource.MustParse("20Gi")}}
		got, err = cs.CoreV1().Pods(runs).Create(ctxT(t, time.Minute), pod, dryRun)
		require.NoError(t, err, "a run that sets only requests is admitted")
		assert.Equal(t, map[string]string{"cpu": "16", "memory": "64Gi", "ephemeral-storage": "100Gi"}, quantityMap(got.Spec.Containers[0].Resources.Limits))
	})

	t.Run("an emptyDir above its bound is refused with the reason, as predicted", func(t *testing.T) {
		pod := loadRunPod(t, "job.yaml", runs)
		big, shm := resource.MustParse("200Gi"), resource.MustParse("32Gi")
		pod.Spec.Volumes = append(pod.Spec.Volumes,
			corev1.Volume{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: &big}}},
			corev1.Volume{Name: "shm", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: &shm}}})
		_, predicted := ev.AdmitPod(context.Background(), pod)
		require.Error(t, predicted, "plan and check predict a refusal")
		assert.True(t, admission.IsRefusal(predicted), "%v", predicted)
		_, err := cs.CoreV1().Pods(runs).Create(ctxT(t, time.Minute), pod, dryRun)
		require.Error(t, err)
		assert.Contains(t, err.Error(), denied+"spec.volumes: volume scratch asks 200Gi of the node's disk, above 100Gi (chart value runs.emptyDir.maxSizeLimit); "+
			"volume shm asks 32Gi in memory, above 16Gi (chart value runs.emptyDir.maxMemorySizeLimit): a run's emptyDir may not ask for more: "+
			"lower its sizeLimit in the run's environment (volumes), or raise that chart value")
		assert.Equal(t, afterForbidden(predicted.Error()), afterForbidden(err.Error()))
	})

	t.Run("no LoadBalancer or NodePort Service in the runs' namespace", func(t *testing.T) {
		for _, typ := range []corev1.ServiceType{corev1.ServiceTypeLoadBalancer, corev1.ServiceTypeNodePort} {
			svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "exposed-" + strings.ToLower(string(typ)), Namespace: runs},
				Spec: corev1.ServiceSpec{Type: typ, Selector: map[string]string{"app": "x"}, Ports: []corev1.ServicePort{{Port: 80}}}}
			_, err := cs.CoreV1().Services(runs).Create(ctxT(t, time.Minute), svc, metav1.CreateOptions{})
			require.Error(t, err, "a %s Service is refused", typ)
			assert.Contains(t, err.Error(), "exceeded quota: "+releaseName+"-runs", typ)
			assert.Contains(t, err.Error(), "limited: ", typ)
			assert.Contains(t, err.Error(), "services.nodeports=0", typ)
			if typ == corev1.ServiceTypeLoadBalancer {
				assert.Contains(t, err.Error(), "services.loadbalancers=0")
			}
		}
		// A ClusterIP Service, as Polyaxon makes for a notebook, is fine.
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "notebook", Namespace: runs},
			Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "x"}, Ports: []corev1.ServicePort{{Port: 80}}}}
		_, err := cs.CoreV1().Services(runs).Create(ctxT(t, time.Minute), svc, dryRun)
		assert.NoError(t, err)
	})

	t.Run("a pod asking for more CPU than all runs may hold is refused by the quota", func(t *testing.T) {
		pod := loadRunPod(t, "job.yaml", runs)
		// Six containers of 15 CPU: each within one node's 16, together above the 80 of all runs
		// (the pools' 40, twice).
		fifteen := corev1.ResourceList{"cpu": resource.MustParse("15")}
		main := pod.Spec.Containers[0]
		main.Resources = corev1.ResourceRequirements{Requests: fifteen, Limits: fifteen}
		pod.Spec.Containers = []corev1.Container{main, main, main, main, main, main}
		for i := range pod.Spec.Containers {
			pod.Spec.Containers[i].Name = "main-" + string(rune('a'+i))
		}
		_, err := cs.CoreV1().Pods(runs).Create(ctxT(t, time.Minute), pod, dryRun)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "exceeded quota: "+releaseName+"-runs, requested: requests.cpu=90")
		assert.Contains(t, err.Error(), "limited: requests.cpu=80")
		// One container above one node's: the LimitRange's max says so first.
		main.Resources = corev1.ResourceRequirements{Requests: corev1.ResourceList{"cpu": resource.MustParse("17")}}
		pod.Spec.Containers = []corev1.Container{main}
		_, err = cs.CoreV1().Pods(runs).Create(ctxT(t, time.Minute), pod, dryRun)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "maximum cpu usage per Container is 16, but limit is 17")
	})

	t.Run("a run through Polyaxon's CLI still succeeds, bounded the same way", func(t *testing.T) {
		addr, err := local.ServiceAddress(c.Cluster, ns, "polyaxon-gateway", 80)
		require.NoError(t, err)
		cli := newPolyaxonCLI(t, venv, "http://"+addr)
		ctx := ctxT(t, 10*time.Minute)
		_, err = cli.run(ctx, "project", "create", "--name", "demo")
		require.NoError(t, err)
		root, err := cluster.RepoRoot()
		require.NoError(t, err)
		uuid := cli.submit(t, ctx, filepath.Join(root, "values", "polyaxonfiles", "hello-job.yaml"), "demo")
		pods := waitRunPods(t, c, cli, runs, uuid, 1)
		p := pods[0]
		sizes := emptyDirSizes(&p)
		assert.Equal(t, "8Gi", sizes["shm"], "Polyaxon's /dev/shm is bounded in memory: %v", sizes)
		for name, size := range sizes {
			if name != "shm" {
				assert.Equal(t, "50Gi", size, "volume %s", name)
			}
		}
		for _, ctr := range append(p.Spec.InitContainers, p.Spec.Containers...) {
			for _, r := range []corev1.ResourceName{"cpu", "memory", "ephemeral-storage"} {
				_, req := ctr.Resources.Requests[r]
				_, lim := ctr.Resources.Limits[r]
				assert.Truef(t, req && lim, "container %s has a %s request and limit: %v", ctr.Name, r, ctr.Resources)
			}
			if ctr.Name == "hello" {
				assert.Equal(t, "100m", ctr.Resources.Requests.Cpu().String(), "the polyaxonfile's own request")
				assert.Equal(t, "1", ctr.Resources.Limits.Cpu().String(), "the default limit")
			}
		}
		cli.waitStatus(t, ctx, "demo", uuid, "succeeded")
	})
}

// quantityMap reads a ResourceList as text.
func quantityMap(l corev1.ResourceList) map[string]string {
	out := map[string]string{}
	for k, v := range l {
		out[string(k)] = v.String()
	}
	return out
}

// emptyDirSizes are a pod's emptyDirs by name, with their sizeLimit ("" when none).
func emptyDirSizes(p *corev1.Pod) map[string]string {
	out := map[string]string{}
	for _, v := range p.Spec.Volumes {
		if v.EmptyDir == nil {
			continue
		}
		out[v.Name] = ""
		if v.EmptyDir.SizeLimit != nil {
			out[v.Name] = v.EmptyDir.SizeLimit.String()
		}
	}
	return out
}
