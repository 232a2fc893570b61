package kind

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sync/errgroup"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/kind/pkg/cluster/nodes"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster"
)

// Images are images of the Docker engine for the nodes of some pools.
type Images struct {
	// Images, as the engine names them (polyaxon/polyaxon-api:2.18.0).
	Images []string
	// Pools whose nodes get them; none means every node, the control plane's too.
	Pools []string
}

// kindRunImages are the repositories of the images of run pods: Polyaxon's (init,
// sidecar, notifier) and the demo run's Python (values/polyaxonfiles/hello-job.yaml).
var kindRunImages = []string{"polyaxon/polyaxon-init", "polyaxon/polyaxon-sidecar", "polyaxon/polyaxon-events-handlers", "python"}

// ImagesByPool splits a chart's images by where their pods run: the images of run pods
// to the run pools' nodes (experiments, builds), every other image (the platform's, Postgres,
// Redis) to the core pool's.
func ImagesByPool(images []string) []Images {
	var core, runs []string
	for _, img := range images {
		repo := img
		if i := strings.LastIndex(img, ":"); i > strings.LastIndex(img, "/") {
			repo = img[:i]
		}
		if slices.Contains(kindRunImages, repo) {
			runs = append(runs, img)
		} else {
			core = append(core, img)
		}
	}
	return []Images{
		{Images: core, Pools: []string{cluster.PoolCore}},
		{Images: runs, Pools: []string{cluster.PoolExperiments, cluster.PoolBuilds}},
	}
}

// LoadImages copies images from the Docker engine (DOCKER_HOST) into the containerd of the
// nodes each set chooses, as `kind load docker-image` does: nothing is pulled. Each set is
// saved once into one archive (layers its images share are in it once); the nodes import
// theirs side by side, each one archive after another.
func (k *Provider) LoadImages(ctx context.Context, c *cluster.Cluster, sets ...Images) error {
	all, err := k.p.ListInternalNodes(c.Name)
	if err != nil {
		return fmt.Errorf("load images: list nodes of %q: %w", c.Name, err)
	}
	// The archives go where the nodes' snapshots are (a tmpfs in the offline setup): written
	// and read once each, they need not touch the disk.
	dir, err := os.MkdirTemp(k.snapshotsDir, "kind-images-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	byNode := map[string][]string{} // node name -> archives to import, in the sets' order
	nodeOf := map[string]nodes.Node{}
	for i, set := range sets {
		if len(set.Images) == 0 {
			continue
		}
		targets, err := k.nodesOfPools(ctx, c, all, set.Pools)
		if err != nil {
			return err
		}
		archive := filepath.Join(dir, fmt.Sprintf("set-%d.tar", i))
		args := append([]string{"save", "-o", archive}, set.Images...)
		if out, err := exec.CommandContext(ctx, "docker", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("load images: docker save %v: %w: %s", set.Images, err, out)
		}
		for _, n := range targets {
			byNode[n.String()] = append(byNode[n.String()], archive)
			nodeOf[n.String()] = n
		}
	}
	g, _ := errgroup.WithContext(ctx)
	for name, archives := range byNode {
		g.Go(func() error {
			for _, a := range archives {
				if err := loadArchive(nodeOf[name], a); err != nil {
					return fmt.Errorf("load images into node %s: %w", name, err)
				}
			}
			return nil
		})
	}
	return g.Wait()
}

// nodesOfPools are the nodes of all labelled with one of pools (all of them for no pools).
func (k *Provider) nodesOfPools(ctx context.Context, c *cluster.Cluster, all []nodes.Node, pools []string) ([]nodes.Node, error) {
	if len(pools) == 0 {
		return all, nil
	}
	sel, err := labels.Parse(fmt.Sprintf("%s in (%s)", cluster.PoolLabel, strings.Join(pools, ",")))
	if err != nil {
		return nil, err
	}
	list, err := c.Clientset.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return nil, fmt.Errorf("load images: list nodes of pools %v: %w", pools, err)
	}
	var names []string
	for _, n := range list.Items {
		names = append(names, n.Name)
	}
	targets := slices.DeleteFunc(slices.Clone(all), func(n nodes.Node) bool { return !slices.Contains(names, n.String()) })
	if len(targets) == 0 {
		return nil, fmt.Errorf("load images: no node of pools %v in %q", pools, c.Name)
	}
	return targets, nil
}

// loadArchive imports an image archive into a node's containerd and unpacks it there, as
// `kind load` does, once per node before any pod starts: an image left packed (as kind's
// node-image build preloads) is unpacked by every container that starts from it while none has
// finished, and the platform's pods start together (six concurrent unpacks of the 0.8 GB Python
// layer filled the disk). Pinned, so that the kubelet's image collection never removes what
// cannot be pulled again.
func loadArchive(n nodes.Node, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	var out bytes.Buffer
	cmd := n.Command("ctr", "--namespace=k8s.io", "images", "import", "--all-platforms", "--digests",
		"--snapshotter=overlayfs", "--label=io.cri-containerd.pinned=pinned", "-").SetStdin(f).SetStdout(&out).SetStderr(&out)
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("ctr images import: %w: %s", err, lastLines(out.String(), 5))
	}
	return nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
