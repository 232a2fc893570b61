package main

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/urfave/cli/v2"
	"golang.org/x/crypto/bcrypt"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// The demo's one user of the authenticating edge: an htpasswd Secret (bcrypt, as the chart's
// edge.htpasswd asks) in the release's namespace, made before the install (check --pre wants
// it), and its password kept in the demo's directory so that `make demo` can print it again.
const (
	demoUser       = "demo"
	demoUserSecret = "polyaxon-demo-users"
)

func demoPasswordFile() string { return filepath.Join(demoDir(), "demo-user-password") }

// demoUserCmd creates the namespace and the Secret if missing and prints the user, the
// password and the Secret's name, a line each.
func demoUserCmd(c *cli.Context) error {
	s, err := readState()
	if err != nil {
		return fmt.Errorf("no demo cluster (run `make demo`): %w", err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", s.Kubeconfig)
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	password, err := demoPassword()
	if err != nil {
		return err
	}
	hash, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.DefaultCost)
	if err != nil {
		return err
	}
	ctx, ns := c.Context, c.String("namespace")
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: demoUserSecret, Namespace: ns},
		StringData: map[string]string{"htpasswd": demoUser + ":" + string(hash) + "\n"}}
	if _, err := cs.CoreV1().Secrets(ns).Create(ctx, secret, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	fmt.Printf("%s\n%s\n%s\n", demoUser, password, demoUserSecret)
	return nil
}

// demoPassword is the demo user's password: the one kept from an earlier run, else a new one.
func demoPassword() (string, error) {
	b, err := os.ReadFile(demoPasswordFile())
	if err == nil && len(b) > 0 {
		return string(b), nil
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	raw := make([]byte, 12)
	if _, err := rand.Read(raw); err != nil {
		return "", err
	}
	password := hex.EncodeToString(raw)
	return password, os.WriteFile(demoPasswordFile(), []byte(password), 0o600)
}
