package ocicaps

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestMissingFromThisMachinesBoundingSet(t *testing.T) {
	// CapBnd 000001fffeffffff: every capability up to CAP_CHECKPOINT_RESTORE but bit 24.
	bnd, err := BoundingSet(strings.NewReader("Name:\tx\nCapBnd:\t000001fffeffffff\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := Missing(bnd); !reflect.DeepEqual(got, []string{"CAP_SYS_RESOURCE"}) {
		t.Fatalf("Missing = %v", got)
	}
	if got := Missing(1<<41 - 1); len(got) != 0 {
		t.Fatalf("full set: Missing = %v", got)
	}
}

func TestRewriteSpecKeepsOtherFields(t *testing.T) {
	doc := `{"ociVersion":"1.2.0","process":{"args":["/sbin/init"],"capabilities":{
		"bounding":["CAP_CHOWN","CAP_SYS_RESOURCE"],"effective":["CAP_SYS_RESOURCE"],
		"permitted":["CAP_CHOWN","CAP_SYS_RESOURCE"]},"x-unknown":1},"root":{"path":"rootfs"}}`
	out, changed, err := RewriteSpec([]byte(doc), false, Fix{Drop: []string{"CAP_SYS_RESOURCE"}})
	if err != nil || !changed {
		t.Fatalf("changed=%v err=%v", changed, err)
	}
	var m map[string]any
	if err := json.Unmarshal(out, &m); err != nil {
		t.Fatal(err)
	}
	p := m["process"].(map[string]any)
	caps := p["capabilities"].(map[string]any)
	if !reflect.DeepEqual(caps["bounding"], []any{"CAP_CHOWN"}) || len(caps["effective"].([]any)) != 0 {
		t.Fatalf("caps = %v", caps)
	}
	if p["x-unknown"] != 1.0 || m["root"] == nil || m["ociVersion"] != "1.2.0" {
		t.Fatalf("lost fields: %s", out)
	}
	// Nothing to drop: the bytes come back as they were.
	same, changed, err := RewriteSpec([]byte(doc), false, Fix{Drop: []string{"CAP_BPF"}})
	if err != nil || changed || string(same) != doc {
		t.Fatalf("unchanged spec rewritten: changed=%v err=%v", changed, err)
	}
	// runc exec --process: the document is the process itself.
	proc := `{"args":["sh"],"capabilities":{"bounding":["CAP_SYS_RESOURCE","CAP_KILL"]}}`
	out, changed, err = RewriteSpec([]byte(proc), true, Fix{Drop: []string{"CAP_SYS_RESOURCE"}})
	if err != nil || !changed || !strings.Contains(string(out), `"bounding":["CAP_KILL"]`) {
		t.Fatalf("process: %s changed=%v err=%v", out, changed, err)
	}
}

func TestTarget(t *testing.T) {
	for _, c := range []struct {
		args    []string
		path    string
		process bool
	}{
		// containerd's runc shim
		{[]string{"--root", "/run/containerd/runc/k8s.io", "--log", "/x/log.json", "--log-format", "json",
			"create", "--bundle", "/run/b/1", "--pid-file", "/run/b/1/init.pid", "id1"}, "/run/b/1/config.json", false},
		{[]string{"--systemd-cgroup", "run", "-b=/b/", "id"}, "/b/config.json", false},
		{[]string{"create", "id"}, "./config.json", false},
		{[]string{"--root", "/r", "exec", "--process", "/tmp/p.json", "--detach", "id"}, "/tmp/p.json", true},
		{[]string{"exec", "-p", "/tmp/p.json", "id"}, "/tmp/p.json", true},
		{[]string{"exec", "id", "sh"}, "", false},
		{[]string{"--root", "/r", "start", "id"}, "", false},
		{[]string{"--root", "/r", "delete", "--force", "id"}, "", false},
		{[]string{"--version"}, "", false},
	} {
		path, process := Target(c.args)
		if path != c.path || process != c.process {
			t.Errorf("Target(%q) = %q, %v; want %q, %v", c.args, path, process, c.path, c.process)
		}
	}
}

func TestRaiseOOMScoreAdj(t *testing.T) {
	zero := 0
	doc := `{"process":{"oomScoreAdj":-998,"capabilities":{}}}`
	out, changed, err := RewriteSpec([]byte(doc), false, Fix{OOMFloor: &zero})
	if err != nil || !changed || !strings.Contains(string(out), `"oomScoreAdj":0`) {
		t.Fatalf("%s changed=%v err=%v", out, changed, err)
	}
	doc = `{"process":{"oomScoreAdj":1000}}`
	if _, changed, _ := RewriteSpec([]byte(doc), false, Fix{OOMFloor: &zero}); changed {
		t.Fatal("a higher oomScoreAdj was changed")
	}
}
