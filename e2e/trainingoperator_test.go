package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster"
)

// The Kubeflow training operator, built from the Go module proxy by
// e2e/scripts/build-training-operator.sh (cached; only the scenarios that need it build it).
var trainingOperator struct {
	once      sync.Once
	bin, crds string
	err       error
}

func trainingOperatorBuild(t *testing.T) (bin, crdDir string) {
	t.Helper()
	trainingOperator.once.Do(func() {
		root, err := cluster.RepoRoot()
		if err != nil {
			trainingOperator.err = err
			return
		}
		start := time.Now()
		var out bytes.Buffer
		cmd := exec.Command("bash", filepath.Join(root, "e2e", "scripts", "build-training-operator.sh"))
		cmd.Stdout, cmd.Stderr = &out, os.Stderr
		if err := cmd.Run(); err != nil {
			trainingOperator.err = fmt.Errorf("build-training-operator.sh: %w", err)
			return
		}
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		if len(lines) < 2 {
			trainingOperator.err = fmt.Errorf("build-training-operator.sh printed %q, want the binary and the CRD directory", out.String())
			return
		}
		trainingOperator.bin, trainingOperator.crds = lines[len(lines)-2], lines[len(lines)-1]
		fmt.Fprintf(os.Stderr, "e2e: training operator ready in %s\n", time.Since(start).Round(100*time.Millisecond))
	})
	require.NoError(t, trainingOperator.err)
	return trainingOperator.bin, trainingOperator.crds
}

// applyKubeflowCRDs creates the operator's CRDs for kinds (e.g. "pytorchjobs") straight from the
// module cache and waits until the API server serves them.
func applyKubeflowCRDs(t *testing.T, c *testCluster, crdDir string, plurals ...string) {
	t.Helper()
	ext, err := apiextensionsclient.NewForConfig(c.RESTConfig)
	require.NoError(t, err)
	for _, plural := range plurals {
		raw, err := os.ReadFile(filepath.Join(crdDir, "kubeflow.org_"+plural+".yaml"))
		require.NoError(t, err)
		crd := &apiextensionsv1.CustomResourceDefinition{}
		require.NoError(t, yaml.Unmarshal(raw, crd))
		if _, err := ext.ApiextensionsV1().CustomResourceDefinitions().Create(ctxT(t, time.Minute), crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			require.NoError(t, err, "create CRD %s", crd.Name)
		}
		waitFor(t, time.Minute, "CRD "+crd.Name+" established", func(ctx context.Context) (bool, string, error) {
			got, err := ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error(), nil
			}
			for _, cond := range got.Status.Conditions {
				if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
					return true, "", nil
				}
			}
			return false, "not established", nil
		})
	}
}

// rotatorCertFile is where the operator's certificate controller looks for the mounted
// certificate before it starts the controllers (its pkg/cert certDir, a constant: only the
// file's existence counts). Its webhook server reads the certificate from
// $TMPDIR/k8s-webhook-server/serving-certs, which the harness keeps private to the run.
const rotatorCertFile = "/tmp/k8s-webhook-server/serving-certs/tls.crt"

// rotatorCert counts this run's operators that rely on rotatorCertFile, so that the file
// this run created goes when the last of them (TestPyTorchJobThroughTheTrainingOperator and TestPolyaxonRunsThroughTheCLI run side by side) ends.
var rotatorCert struct {
	sync.Mutex
	users   int
	created bool
}

// useRotatorCert makes sure rotatorCertFile exists (created with pem if missing, never
// rewritten) and removes the file this run created once no operator of the run needs it.
func useRotatorCert(t *testing.T, pem []byte) error {
	rotatorCert.Lock()
	defer rotatorCert.Unlock()
	if err := os.MkdirAll(filepath.Dir(rotatorCertFile), 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(rotatorCertFile, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	switch {
	case err == nil:
		_, err = f.Write(pem)
		if err = errors.Join(err, f.Close()); err != nil {
			return err
		}
		rotatorCert.created = true
	case !os.IsExist(err):
		return err
	}
	rotatorCert.users++
	t.Cleanup(func() {
		rotatorCert.Lock()
		defer rotatorCert.Unlock()
		if rotatorCert.users--; rotatorCert.users == 0 && rotatorCert.created {
			_ = os.Remove(rotatorCertFile)
			rotatorCert.created = false
		}
	})
	return nil
}

// trainingOperatorSecret is the Secret its certificate controller fills (--webhook-secret-name).
const trainingOperatorSecret = "training-operator-webhook-cert"

// trainingOperatorNamespace is the operator's own namespace (its pod's, MY_POD_NAMESPACE: its
// webhook certificate's Secret is there), as Kubeflow installs it; it watches the runs'.
const trainingOperatorNamespace = "kubeflow"

// startTrainingOperator runs the operator's manager as a local process against the cluster,
// in trainingOperatorNamespace, watching namespace (the runs'), with the controllers of
// schemes (default: only pytorchjob). No webhook is registered with the
// API server: nothing calls it. The operator's certificate controller still insists on a
// Secret to fill and on seeing the certificate mounted before it starts the controllers; this
// harness creates the Secret and, as the kubelet would mount it, writes its files. Its webhook
// server, started right after, must load a certificate: a self-signed one is in place before
// the process starts, since the controller's "mounted" check (rotatorCertFile) may already
// pass on another operator's file when TestPyTorchJobThroughTheTrainingOperator and TestPolyaxonRunsThroughTheCLI run side by side, before the harness
// copied the Secret. The process is killed when the test ends; its log is printed if the test
// failed.
func startTrainingOperator(t *testing.T, c *testCluster, bin, namespace string, schemes ...string) {
	t.Helper()
	if len(schemes) == 0 {
		schemes = []string{"pytorchjob"}
	}
	createNamespace(t, c, trainingOperatorNamespace)
	_, err := c.Clientset.CoreV1().Secrets(trainingOperatorNamespace).Create(ctxT(t, time.Minute), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: trainingOperatorSecret}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err)
	}
	ports := freePorts(t, 3)
	tmp := t.TempDir()
	certDir := filepath.Join(tmp, "k8s-webhook-server", "serving-certs")
	require.NoError(t, os.MkdirAll(certDir, 0o700))
	crt, key := selfSignedCert(t, "training-operator."+trainingOperatorNamespace+".svc")
	require.NoError(t, os.WriteFile(filepath.Join(certDir, "tls.crt"), crt, 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(certDir, "tls.key"), key, 0o600))
	logPath := filepath.Join(tmp, "training-operator.log")
	logFile, err := os.Create(logPath)
	require.NoError(t, err)
	var args []string
	for _, s := range schemes {
		args = append(args, "--enable-scheme="+s)
	}
	cmd := exec.Command(bin, append(args,
		"--namespace="+namespace,
		"--metrics-bind-address=127.0.0.1:"+strconv.Itoa(ports[0]),
		"--health-probe-bind-address=127.0.0.1:"+strconv.Itoa(ports[1]),
		"--webhook-server-port="+strconv.Itoa(ports[2]),
		"--zap-log-level=info")...)
	cmd.Env = append(subprocessEnv(), "KUBECONFIG="+c.KubeconfigPath, "MY_POD_NAMESPACE="+trainingOperatorNamespace, "TMPDIR="+tmp)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	require.NoError(t, cmd.Start())
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
		_ = logFile.Close()
		if t.Failed() {
			if b, err := os.ReadFile(logPath); err == nil {
				t.Logf("training operator log (last 60 lines):\n%s", lastLines(string(b), 60))
			}
		}
	})

	// The kubelet's part: mount the Secret once the operator has written its certificate.
	waitFor(t, 2*time.Minute, "the training operator's webhook certificate", func(ctx context.Context) (bool, string, error) {
		select {
		case <-done:
			b, _ := os.ReadFile(logPath)
			return false, "", fmt.Errorf("the training operator exited:\n%s", lastLines(string(b), 30))
		default:
		}
		s, err := c.Clientset.CoreV1().Secrets(trainingOperatorNamespace).Get(ctx, trainingOperatorSecret, metav1.GetOptions{})
		if err != nil || len(s.Data["tls.crt"]) == 0 || len(s.Data["tls.key"]) == 0 {
			return false, "Secret not filled yet", nil
		}
		for _, k := range []string{"tls.crt", "tls.key", "ca.crt"} {
			if err := os.WriteFile(filepath.Join(certDir, k), s.Data[k], 0o600); err != nil {
				return false, "", err
			}
		}
		// Shared by every run on this machine: created if missing, never rewritten.
		err = useRotatorCert(t, s.Data["tls.crt"])
		return err == nil, "", err
	})
	// Ready when its controllers run (the readyz check passes only after that).
	waitFor(t, 2*time.Minute, "the training operator's controllers", func(ctx context.Context) (bool, string, error) {
		select {
		case <-done:
			b, _ := os.ReadFile(logPath)
			return false, "", fmt.Errorf("the training operator exited:\n%s", lastLines(string(b), 30))
		default:
		}
		b, _ := os.ReadFile(logPath)
		for _, s := range schemes {
			if !bytes.Contains(b, []byte("Starting workers\t{\"controller\": \""+s+"-controller\"")) {
				return false, lastLines(string(b), 3), nil
			}
		}
		return true, "", nil
	})
}

// selfSignedCert is a PEM certificate for dnsName and its key, valid for a day.
func selfSignedCert(t *testing.T, dnsName string) (crt, key []byte) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: dnsName},
		DNSNames:     []string{dnsName},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	require.NoError(t, err)
	kb, err := x509.MarshalECPrivateKey(k)
	require.NoError(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb})
}

func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var ls []net.Listener
	var out []int
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		ls = append(ls, l)
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		_ = l.Close()
	}
	return out
}

func lastLines(s string, n int) string {
	var lines []string
	sc := bufio.NewScanner(strings.NewReader(s))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
