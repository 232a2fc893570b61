package registrytest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// CA is a certificate authority made for one test run.
type CA struct {
	Cert *x509.Certificate
	key  *ecdsa.PrivateKey
	// File is the CA certificate in PEM, what a user passes as --ca-file.
	File string
	Pool *x509.CertPool
}

// KeyPair is a certificate signed by a CA, with its key, in memory and as PEM files.
type KeyPair struct {
	TLS      tls.Certificate
	CertFile string
	KeyFile  string
}

// NewCA creates a CA and writes its certificate into dir.
func NewCA(dir, name string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	file := filepath.Join(dir, name+"-ca.pem")
	if err := writePEM(file, "CERTIFICATE", der); err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &CA{Cert: cert, key: key, File: file, Pool: pool}, nil
}

// Server issues a server certificate for 127.0.0.1 and localhost.
func (ca *CA) Server(dir, name string) (*KeyPair, error) {
	return ca.issue(dir, name, x509.ExtKeyUsageServerAuth, func(c *x509.Certificate) {
		c.DNSNames = []string{"localhost"}
		c.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
	})
}

// Client issues a client certificate (for registries that ask for one).
func (ca *CA) Client(dir, name string) (*KeyPair, error) {
	return ca.issue(dir, name, x509.ExtKeyUsageClientAuth, func(*x509.Certificate) {})
}

func (ca *CA) issue(dir, name string, usage x509.ExtKeyUsage, edit func(*x509.Certificate)) (*KeyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
	}
	edit(tmpl)
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	kp := &KeyPair{CertFile: filepath.Join(dir, name+".pem"), KeyFile: filepath.Join(dir, name+"-key.pem")}
	if err := writePEM(kp.CertFile, "CERTIFICATE", der); err != nil {
		return nil, err
	}
	if err := writePEM(kp.KeyFile, "EC PRIVATE KEY", keyDER); err != nil {
		return nil, err
	}
	kp.TLS, err = tls.LoadX509KeyPair(kp.CertFile, kp.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", name, err)
	}
	return kp, nil
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	return n
}

func writePEM(path, typ string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600)
}
