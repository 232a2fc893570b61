package trainingoperator

import (
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
	"io"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"

	"github.com/polyaxon-deploy/polyaxon-deploy/e2e/cluster"
)

// The Kubeflow training operator (v1.8.1, e2e/scripts/build-training-operator.sh) as the demo
// runs it: its manager as a process on this machine against a local cluster, as the e2e
// scenarios run it (e2e/trainingoperator_test.go, whose facts this follows).
const (
	// Namespace is the operator's own namespace (its pod's, MY_POD_NAMESPACE),
	// where its webhook certificate's Secret is, as Kubeflow installs it.
	Namespace = "kubeflow"
	// trainingOperatorSecret is the Secret its certificate controller fills.
	trainingOperatorSecret = "training-operator-webhook-cert"
	// rotatorCertFile is where the certificate controller looks for the mounted certificate
	// before it starts the controllers (a constant of its pkg/cert: only the file's existence
	// counts). Its webhook server reads $TMPDIR/k8s-webhook-server/serving-certs.
	rotatorCertFile = "/tmp/k8s-webhook-server/serving-certs/tls.crt"
)

// ApplyKubeflowCRDs creates the training operator's CRDs for plurals (e.g. "tfjobs") from
// crdDir (the module's manifests/base/crds) unless they exist, and waits until they are served.
func ApplyKubeflowCRDs(ctx context.Context, c *cluster.Cluster, crdDir string, plurals ...string) error {
	ext, err := apiextensionsclient.NewForConfig(c.RESTConfig)
	if err != nil {
		return err
	}
	for _, plural := range plurals {
		raw, err := os.ReadFile(filepath.Join(crdDir, "kubeflow.org_"+plural+".yaml"))
		if err != nil {
			return err
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.Unmarshal(raw, crd); err != nil {
			return fmt.Errorf("CRD %s: %w", plural, err)
		}
		if _, err := ext.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create CRD %s: %w", crd.Name, err)
		}
		err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			got, err := ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
			if err != nil {
				return false, nil //nolint:nilerr // retried
			}
			for _, cond := range got.Status.Conditions {
				if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			return fmt.Errorf("CRD %s not established: %w", crd.Name, err)
		}
	}
	return nil
}

// Operator is the training operator's manager run for a local cluster.
type Operator struct {
	// Bin is the manager (training-operator.v1).
	Bin string
	// Namespace is the namespace it watches (the runs').
	Namespace string
	// Schemes are the controllers it runs (tfjob, pytorchjob, ...).
	Schemes []string
	// Dir holds its TMPDIR (webhook certificate) and its log, training-operator.log.
	Dir string
	// Env is its environment (default: this process's), before KUBECONFIG, TMPDIR and
	// MY_POD_NAMESPACE.
	Env []string
}

// LogPath is the manager's log.
func (o Operator) LogPath() string { return filepath.Join(o.Dir, "training-operator.log") }

// Run starts the manager and plays the kubelet's part for it: the Secret its certificate
// controller fills exists, and once filled its files are where the manager reads them. No
// webhook is registered with the API server: nothing calls it. It returns once the
// controllers run; the process is killed when ctx ends, and done is closed once it has
// exited (its error, if any, is in the log).
func (o Operator) Run(ctx context.Context, c *cluster.Cluster) (done <-chan struct{}, err error) {
	cs := c.Clientset
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Namespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	if _, err := cs.CoreV1().Secrets(Namespace).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: trainingOperatorSecret}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	certDir := filepath.Join(o.Dir, "tmp", "k8s-webhook-server", "serving-certs")
	if err := os.MkdirAll(certDir, 0o700); err != nil {
		return nil, err
	}
	// Its webhook server loads a certificate at start: a self-signed one until the Secret's.
	crt, key, err := selfSignedCert("training-operator." + Namespace + ".svc")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(certDir, "tls.crt"), crt, 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(certDir, "tls.key"), key, 0o600); err != nil {
		return nil, err
	}
	logPath := o.LogPath()
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	ports, err := loopbackPorts(3)
	if err != nil {
		return nil, err
	}
	var args []string
	for _, s := range o.Schemes {
		args = append(args, "--enable-scheme="+s)
	}
	cmd := exec.CommandContext(ctx, o.Bin, append(args,
		"--namespace="+o.Namespace,
		"--metrics-bind-address=127.0.0.1:"+strconv.Itoa(ports[0]),
		"--health-probe-bind-address=127.0.0.1:"+strconv.Itoa(ports[1]),
		"--webhook-server-port="+strconv.Itoa(ports[2]),
		"--zap-log-level=info")...)
	env := o.Env
	if env == nil {
		env = os.Environ()
	}
	cmd.Env = append(slices.Clone(env), "KUBECONFIG="+c.KubeconfigPath, "MY_POD_NAMESPACE="+Namespace, "TMPDIR="+filepath.Join(o.Dir, "tmp"))
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// It goes with whoever started it, even when that one is killed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("start the training operator: %w", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); _ = logFile.Close(); close(exited) }()
	fail := func(err error) (<-chan struct{}, error) {
		_ = cmd.Process.Kill()
		<-exited
		b, _ := os.ReadFile(logPath)
		return nil, fmt.Errorf("%w; its log (%s) ends:\n%s", err, logPath, tailLines(b, 20))
	}

	var release func() // this operator's use of rotatorCertFile
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		select {
		case <-exited:
			return false, errors.New("the training operator exited")
		default:
		}
		s, err := cs.CoreV1().Secrets(Namespace).Get(ctx, trainingOperatorSecret, metav1.GetOptions{})
		if err != nil || len(s.Data["tls.crt"]) == 0 || len(s.Data["tls.key"]) == 0 {
			return false, nil //nolint:nilerr // not filled yet
		}
		for _, k := range []string{"tls.crt", "tls.key", "ca.crt"} {
			if err := os.WriteFile(filepath.Join(certDir, k), s.Data[k], 0o600); err != nil {
				return false, err
			}
		}
		// Shared by every operator on this machine: created if missing, never rewritten.
		release, err = useRotatorCert(s.Data["tls.crt"])
		return err == nil, err
	})
	if err != nil {
		return fail(fmt.Errorf("the training operator's webhook certificate: %w", err))
	}
	go func() { <-exited; release() }()
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		select {
		case <-exited:
			return false, errors.New("the training operator exited")
		default:
		}
		b, _ := os.ReadFile(logPath)
		for _, s := range o.Schemes {
			if !bytes.Contains(b, []byte("Starting workers\t{\"controller\": \""+s+"-controller\"")) {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fail(fmt.Errorf("the training operator's controllers did not start: %w", err))
	}
	return exited, nil
}

// rotatorCert counts this process's operators that rely on rotatorCertFile, so that the file
// it created goes when the last of them ends (tests run several side by side).
var rotatorCert struct {
	sync.Mutex
	users   int
	created bool
}

// useRotatorCert makes sure rotatorCertFile exists (created with pem if missing, never
// rewritten); release ends this operator's use, removing the file this process created once
// no operator of it needs it.
func useRotatorCert(pem []byte) (release func(), err error) {
	rotatorCert.Lock()
	defer rotatorCert.Unlock()
	if err := os.MkdirAll(filepath.Dir(rotatorCertFile), 0o700); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(rotatorCertFile, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	switch {
	case err == nil:
		_, err = f.Write(pem)
		if err = errors.Join(err, f.Close()); err != nil {
			return nil, err
		}
		rotatorCert.created = true
	case !os.IsExist(err):
		return nil, err
	}
	rotatorCert.users++
	return sync.OnceFunc(func() {
		rotatorCert.Lock()
		defer rotatorCert.Unlock()
		if rotatorCert.users--; rotatorCert.users == 0 && rotatorCert.created {
			_ = os.Remove(rotatorCertFile)
			rotatorCert.created = false
		}
	}), nil
}

// selfSignedCert is a PEM certificate for dnsName and its key, valid for a year.
func selfSignedCert(dnsName string) (crt, key []byte, err error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: dnsName},
		DNSNames:     []string{dnsName},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		return nil, nil, err
	}
	kb, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), nil
}

// loopbackPorts are n free ports on 127.0.0.1.
func loopbackPorts(n int) ([]int, error) {
	var out []int
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close()
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	return out, nil
}

func tailLines(b []byte, n int) string {
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// Build is what build-training-operator.sh made: the Kubeflow training
// operator's manager and the directory of its CRDs.
type Build struct {
	Bin, CRDs string
}

// EnsureBuild builds the Kubeflow training operator from the Go module proxy
// (e2e/scripts/build-training-operator.sh; minutes cold, cached) and returns its manager and
// CRDs.
func EnsureBuild(ctx context.Context, progress io.Writer) (Build, error) {
	p, err := cluster.RunBuildScript(ctx, "build-training-operator.sh", 2, progress)
	if err != nil {
		return Build{}, err
	}
	return Build{Bin: p[0], CRDs: p[1]}, nil
}
