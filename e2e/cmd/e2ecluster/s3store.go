package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/urfave/cli/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster"
	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster/addons/s3store"
	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/s3test"
)

// The demo's artifacts store in a bucket (DEMO_ARTIFACTS=s3, issue 56): versitygw (the s3store
// add-on) as a Deployment of namespace s3 (restricted Pod Security), as TestArtifactsInAnS3Store
// and the kind scenario run it. On the local provider the hosts daemon runs it as the host
// program of that pod (it also runs the runs' own Python containers and Polyaxon's sidecar, so
// a run's outputs and logs reach the bucket); on kind it is the image build-kind-images.sh
// built and `up` loaded into the core node. `e2ecluster s3store up` starts it, makes an account
// of role user and the bucket it owns, writes that account's keys and the store's in-cluster
// endpoint to Secret polyaxon-s3 of the release's namespace, and writes the chart's values for
// the install; `secret` copies the Secret to the runs' namespace once the release made it;
// `ls` lists the bucket and `env` prints the variables an S3 client of your own needs.
const (
	// artifactsVolume is the demo's default store: a directory every node sees, behind the
	// chart's claims (values/kind-demo.yaml on kind, a hostPath set by demo.sh locally).
	artifactsVolume = "volume"
	artifactsS3     = "s3"

	s3Namespace = "s3"
	s3Bucket    = "polyaxon-artifacts"
	// s3Secret is the Secret of the chart's artifactsStore.secret.name (values/artifacts-s3.yaml's).
	s3Secret = "polyaxon-s3"
)

// s3State is what `s3store up` made: the demo's account (its keys: the file is private) and
// the bucket it owns, kept so that a second `make demo` reuses them.
type s3State struct {
	Bucket    string `json:"bucket"`
	AccessKey string `json:"accessKey"`
	SecretKey string `json:"secretKey"`
	// Endpoint is the store's S3 API inside the cluster (the Secret's AWS_ENDPOINT_URL).
	Endpoint string `json:"endpoint"`
	// Kubectl starts the kind demo's port-forwards again when they stopped.
	Kubectl string `json:"kubectl,omitempty"`
}

func s3StatePath() string  { return filepath.Join(demoDir(), "s3store.json") }
func s3ValuesPath() string { return filepath.Join(demoDir(), "artifacts-s3.yaml") }

// s3AddressFile is where the hosts daemon writes the loopback addresses of the store's S3 API
// and admin API (local provider), a line each.
func s3AddressFile(addressFile string) string {
	return filepath.Join(filepath.Dir(addressFile), "s3-address")
}

func readS3State() (*s3State, error) {
	b, err := os.ReadFile(s3StatePath())
	if err != nil {
		return nil, err
	}
	var st s3State
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("read %s: %w", s3StatePath(), err)
	}
	return &st, nil
}

func writeS3State(st *s3State) error {
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	tmp := s3StatePath() + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, s3StatePath())
}

// removeS3Files removes what `s3store up` wrote in the demo's directory (`down`).
func removeS3Files() {
	for _, f := range []string{s3StatePath(), s3ValuesPath()} {
		_ = os.Remove(f)
	}
}

// s3Forwards reach the store's Services from this machine on kind (`kubectl port-forward`).
var (
	s3APIForward   = demoForward{name: "kind-s3-forward", namespace: s3Namespace, target: "svc/" + s3store.Name, remotePort: "s3"}
	s3AdminForward = demoForward{name: "kind-s3-admin-forward", namespace: s3Namespace, target: "svc/" + s3store.Name + "-admin", remotePort: "admin"}
)

// demoS3 reads the demo's state and checks it was made with the S3 store.
func demoS3() (*state, error) {
	s, err := readState()
	if err != nil {
		return nil, fmt.Errorf("no demo cluster (run `DEMO_ARTIFACTS=s3 make demo`): %w", err)
	}
	if s.artifacts() != artifactsS3 {
		return nil, fmt.Errorf("demo cluster %s was made with its artifacts on a volume: `make demo-down`, then `DEMO_ARTIFACTS=s3 make demo`", s.Name)
	}
	return s, nil
}

// s3Addresses are host:port of the store's S3 API and admin API from this machine: the hosts
// daemon's loopback listeners (local), or port-forwards of this demo (kind), started when they
// do not run, and waited for until they answer.
func s3Addresses(ctx context.Context, s *state, kubectl string) (api, admin string, err error) {
	if s.Provider == "kind" {
		if api, err = ensureForward(ctx, s3APIForward, kubectl, s.Kubeconfig); err != nil {
			return "", "", err
		}
		admin, err = ensureForward(ctx, s3AdminForward, kubectl, s.Kubeconfig)
		return api, admin, err
	}
	if s.Hosts == nil || s.Hosts.S3Store == "" {
		return "", "", fmt.Errorf("the hosts daemon of demo cluster %s runs no S3 store: `make demo-down`, then `DEMO_ARTIFACTS=s3 make demo`", s.Name)
	}
	if !hostsAlive(s.Hosts) {
		return "", "", fmt.Errorf("the hosts daemon is not running (`make demo` starts it again):\n%s", tail(s.Hosts.Log, 15))
	}
	file := s3AddressFile(s.Hosts.AddressFile)
	b, err := os.ReadFile(file)
	if err != nil {
		return "", "", fmt.Errorf("the hosts daemon wrote no address of the S3 store (%s): %w", s.Hosts.Log, err)
	}
	lines := strings.Fields(string(b))
	if len(lines) != 2 {
		return "", "", fmt.Errorf("%s: want two addresses, got %q", file, b)
	}
	return lines[0], lines[1], nil
}

// ensureForward is a running port-forward's address (started when it is not), once a
// connection to it is accepted and answered.
func ensureForward(ctx context.Context, f demoForward, kubectl, kubeconfig string) (string, error) {
	addr, alive := f.running()
	if !alive {
		var err error
		if addr, err = f.start(kubectl, kubeconfig); err != nil {
			return "", err
		}
	}
	deadline := time.Now().Add(time.Minute)
	for {
		// kubectl accepts on its port before it reaches the pod: an HTTP answer says both work.
		err := httpAnswers(ctx, "http://"+addr+"/")
		if err == nil {
			return addr, nil
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("`kubectl port-forward %s` in namespace %s does not answer at %s: %v (log: %s)", f.target, f.namespace, addr, err, f.logFile())
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// httpAnswers is nil when url answers HTTP at all (any status).
func httpAnswers(ctx context.Context, url string) error {
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}

// s3StoreUp (`e2ecluster s3store up`) starts the store (or finds the one started earlier),
// makes the demo's account and bucket unless they answer, writes Secret polyaxon-s3 in the
// release's namespace (made when missing), and writes the chart's values for the install,
// whose path it prints.
func s3StoreUp(c *cli.Context) error {
	s, err := demoS3()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(c.Context, c.Duration("wait"))
	defer cancel()
	start := time.Now()
	cl, err := cluster.FromKubeconfig(s.Name, s.Provider, s.Kubeconfig)
	if err != nil {
		return err
	}
	cs := cl.Clientset
	ns := c.String("namespace")
	for name, labels := range map[string]map[string]string{
		s3Namespace: {"pod-security.kubernetes.io/enforce": "restricted"},
		ns:          nil,
	} {
		_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("namespace %s: %w", name, err)
		}
	}
	opts := s3store.Options{Namespace: s3Namespace, NodeSelector: map[string]string{cluster.PoolLabel: cluster.PoolCore}}
	store, err := s3store.Existing(ctx, cl, opts)
	if err == nil && store == nil {
		store, err = s3store.Deploy(ctx, cl, opts)
	}
	if err != nil {
		return fmt.Errorf("the demo's S3 store: %w", err)
	}
	kubectl := c.String("kubectl")
	st, _ := readS3State()
	if st == nil {
		st = &s3State{Bucket: s3Bucket, AccessKey: "DEMO" + strings.ToUpper(randomHex(8)), SecretKey: randomHex(20)}
	}
	st.Endpoint = store.Endpoint
	if kubectl != "" {
		st.Kubectl = kubectl
	} else {
		kubectl = st.Kubectl
	}
	api, admin, err := s3Addresses(ctx, s, kubectl)
	if err != nil {
		return err
	}
	root := s3test.Attach("http://"+api, "http://"+admin, store.RootAccessKey, store.RootSecretKey)
	if err := ensureAccountAndBucket(ctx, root, st); err != nil {
		return err
	}
	if err := writeS3State(st); err != nil {
		return err
	}
	if err := applyS3Secret(ctx, cl, ns, st); err != nil {
		return err
	}
	if err := os.WriteFile(s3ValuesPath(), []byte(s3Values(st)), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "S3 store %s/%s (versitygw): bucket %s owned by account %s, Secret %s/%s; ready in %s\n",
		s3Namespace, s3store.Name, st.Bucket, st.AccessKey, ns, s3Secret, time.Since(start).Round(100*time.Millisecond))
	fmt.Println(s3ValuesPath())
	return nil
}

// ensureAccountAndBucket makes the demo's account and its bucket unless the account already
// reaches the bucket (a second `make demo`); either existing already is no error.
func ensureAccountAndBucket(ctx context.Context, root *s3test.Store, st *s3State) error {
	client := root.Client(st.AccessKey, st.SecretKey)
	if _, err := client.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(st.Bucket)}); err == nil {
		return nil
	}
	if err := root.CreateUser(ctx, st.AccessKey, st.SecretKey); err != nil && !adminCode(err, "XAdminUserExists") {
		return err
	}
	if err := root.CreateBucket(ctx, st.Bucket, st.AccessKey); err != nil && !adminCode(err, "BucketAlreadyOwnedByYou") {
		return err
	}
	if _, err := client.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(st.Bucket)}); err != nil {
		return fmt.Errorf("account %s does not reach bucket %s after making them: %w", st.AccessKey, st.Bucket, err)
	}
	return nil
}

// adminCode reports whether err is versitygw's admin API answering code (409: what exists).
func adminCode(err error, code string) bool {
	var ae *s3test.AdminError
	return errors.As(err, &ae) && ae.Code == code
}

// s3SecretData is what the chart's artifactsStore.secret holds for a bucket
// (values/artifacts-s3.yaml): the account's keys, the store's endpoint inside the cluster, and
// both region variables (Polyaxon reads AWS_REGION, botocore AWS_DEFAULT_REGION).
func s3SecretData(st *s3State) map[string]string {
	return map[string]string{
		"AWS_ACCESS_KEY_ID": st.AccessKey, "AWS_SECRET_ACCESS_KEY": st.SecretKey, "AWS_ENDPOINT_URL": st.Endpoint,
		"AWS_REGION": s3test.Region, "AWS_DEFAULT_REGION": s3test.Region,
	}
}

// applyS3Secret creates Secret polyaxon-s3 in ns, or sets its data to the demo's.
func applyS3Secret(ctx context.Context, cl *cluster.Cluster, ns string, st *s3State) error {
	secrets := cl.Clientset.CoreV1().Secrets(ns)
	want := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: s3Secret, Namespace: ns}, StringData: s3SecretData(st)}
	_, err := secrets.Create(ctx, want, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		var cur *corev1.Secret
		if cur, err = secrets.Get(ctx, s3Secret, metav1.GetOptions{}); err == nil {
			cur.Data, cur.StringData = nil, want.StringData
			_, err = secrets.Update(ctx, cur, metav1.UpdateOptions{})
		}
	}
	if err != nil {
		return fmt.Errorf("Secret %s/%s: %w", ns, s3Secret, err)
	}
	return nil
}

// s3Values are the chart's values for the demo's bucket (values/artifacts-s3.yaml's, with the
// demo's bucket).
func s3Values(st *s3State) string {
	return fmt.Sprintf(`# Written by e2ecluster s3store up for the demo's install (DEMO_ARTIFACTS=s3):
# the artifacts store is bucket %[1]s of the demo's S3 store (versitygw,
# Service %[2]s/%[3]s); Secret %[4]s holds its account's keys and
# AWS_ENDPOINT_URL=%[5]s.
artifactsStore:
  name: artifacts
  kind: s3
  bucket: s3://%[1]s
  secret:
    name: %[4]s
`, st.Bucket, s3Namespace, s3store.Name, s3Secret, st.Endpoint)
}

// s3StoreSecret (`e2ecluster s3store secret`) writes Secret polyaxon-s3 in another namespace
// (the runs', once the release made it).
func s3StoreSecret(c *cli.Context) error {
	s, err := demoS3()
	if err != nil {
		return err
	}
	st, err := readS3State()
	if err != nil {
		return fmt.Errorf("the demo's S3 store is not up (`e2ecluster s3store up`): %w", err)
	}
	cl, err := cluster.FromKubeconfig(s.Name, s.Provider, s.Kubeconfig)
	if err != nil {
		return err
	}
	ns := c.String("namespace")
	if err := applyS3Secret(c.Context, cl, ns, st); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "Secret %s/%s: the demo's bucket %s\n", ns, s3Secret, st.Bucket)
	return nil
}

// s3Client is the demo's account's S3 client, reached from this machine, and the address.
func s3Client(c *cli.Context) (*s3.Client, *s3State, string, error) {
	s, err := demoS3()
	if err != nil {
		return nil, nil, "", err
	}
	st, err := readS3State()
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, "", errors.New("the demo's S3 store is not up: `DEMO_ARTIFACTS=s3 make demo` starts it")
	}
	if err != nil {
		return nil, nil, "", err
	}
	kubectl := c.String("kubectl")
	if kubectl == "" {
		kubectl = st.Kubectl
	}
	api, _, err := s3Addresses(c.Context, s, kubectl)
	if err != nil {
		return nil, nil, "", err
	}
	return s3test.Attach("http://"+api, "", "", "").Client(st.AccessKey, st.SecretKey), st, api, nil
}

// s3StoreLs (`e2ecluster s3store ls [PREFIX]`) lists the bucket's objects: time, size, key.
func s3StoreLs(c *cli.Context) error {
	client, st, _, err := s3Client(c)
	if err != nil {
		return err
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	p := s3.NewListObjectsV2Paginator(client, &s3.ListObjectsV2Input{Bucket: aws.String(st.Bucket), Prefix: aws.String(c.Args().First())})
	n := 0
	for p.HasMorePages() {
		page, err := p.NextPage(c.Context)
		if err != nil {
			return fmt.Errorf("list s3://%s: %w", st.Bucket, err)
		}
		for _, o := range page.Contents {
			fmt.Fprintf(w, "%s\t%d\ts3://%s/%s\n", aws.ToTime(o.LastModified).UTC().Format(time.DateTime), aws.ToInt64(o.Size), st.Bucket, aws.ToString(o.Key))
			n++
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "%d objects in s3://%s\n", n, st.Bucket)
	return nil
}

// s3StoreEnv (`e2ecluster s3store env`) prints export lines that point an S3 client of your
// own (aws, boto3, ...) at the demo's bucket from this machine.
func s3StoreEnv(c *cli.Context) error {
	_, st, api, err := s3Client(c)
	if err != nil {
		return err
	}
	env := s3SecretData(st)
	env["AWS_ENDPOINT_URL"] = "http://" + api
	for _, k := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_ENDPOINT_URL", "AWS_REGION", "AWS_DEFAULT_REGION"} {
		fmt.Printf("export %s=%s\n", k, shellQuote(env[k]))
	}
	return nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// writeS3Addresses writes the loopback addresses of the store's S3 API and admin API, a line
// each, to file (the hosts daemon, once it watches the cluster).
func writeS3Addresses(file string, address func(ns, svc string, port int32) (string, error)) error {
	api, err := address(s3Namespace, s3store.Name, s3store.Port)
	if err != nil {
		return err
	}
	admin, err := address(s3Namespace, s3store.Name+"-admin", s3store.AdminPort)
	if err != nil {
		return err
	}
	tmp := file + ".tmp"
	if err := os.WriteFile(tmp, []byte(api+"\n"+admin+"\n"), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, file)
}

var s3storeCommand = &cli.Command{
	Name:  "s3store",
	Usage: "the demo's artifacts store in an S3 bucket (DEMO_ARTIFACTS=s3): versitygw in namespace s3",
	Subcommands: []*cli.Command{{
		Name:  "up",
		Usage: "start the store (or find it), make the demo's account and bucket, write Secret polyaxon-s3 in --namespace; print the path of the chart's values for the install",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "namespace", Value: "polyaxon", Usage: "the release's namespace"},
			&cli.StringFlag{Name: "kubectl", Usage: "kind: the kubectl that forwards the store's ports"},
			&cli.DurationFlag{Name: "wait", Value: 5 * time.Minute},
		},
		Action: s3StoreUp,
	}, {
		Name:  "secret",
		Usage: "write Secret polyaxon-s3 in --namespace (the runs' own, once the release made it)",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "namespace", Value: "polyaxon-runs"},
		},
		Action: s3StoreSecret,
	}, {
		Name:      "ls",
		Usage:     "list the bucket's objects (under PREFIX): time (UTC), size, URL",
		ArgsUsage: "[PREFIX]",
		Flags:     []cli.Flag{&cli.StringFlag{Name: "kubectl", Usage: "kind: the kubectl that forwards the store's port (default: the one `up` was given)"}},
		Action:    s3StoreLs,
	}, {
		Name:   "env",
		Usage:  "print export lines for an S3 client of your own (aws s3 ls s3://polyaxon-artifacts --recursive)",
		Flags:  []cli.Flag{&cli.StringFlag{Name: "kubectl", Usage: "kind: the kubectl that forwards the store's port (default: the one `up` was given)"}},
		Action: s3StoreEnv,
	}},
}
