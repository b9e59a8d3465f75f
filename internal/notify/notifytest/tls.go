package notifytest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TLSFiles is a throw-away certificate authority with a server certificate
// for 127.0.0.1 and 127.0.0.2 and a client certificate, written as PEM files in a
// directory of the test's.
type TLSFiles struct {
	// CA is the path of the CA certificate.
	CA string
	// Cert and Key are the paths of the client certificate and its key.
	Cert, Key string
	// Server is a server configuration presenting the server certificate
	// and requiring a client certificate signed by the CA.
	Server *tls.Config

	ca    *x509.Certificate
	caKey *ecdsa.PrivateKey
}

// NewTLSFiles creates a CA, a server and a client certificate for t.
func NewTLSFiles(t testing.TB) TLSFiles {
	t.Helper()
	dir := t.TempDir()
	caKey := newKey(t)
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "notifytest CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	must(t, "CA certificate", err)
	ca, err := x509.ParseCertificate(caDER)
	must(t, "CA certificate", err)
	pool := x509.NewCertPool()
	pool.AddCert(ca)

	issue := func(serial int64, usage x509.ExtKeyUsage) (certPEM, keyPEM []byte) {
		key := newKey(t)
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial),
			Subject:      pkix.Name{CommonName: "notifytest"},
			NotBefore:    time.Now().Add(-time.Hour),
			NotAfter:     time.Now().Add(time.Hour),
			KeyUsage:     x509.KeyUsageDigitalSignature,
			ExtKeyUsage:  []x509.ExtKeyUsage{usage},
			IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv4(127, 0, 0, 2)},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		must(t, "certificate", err)
		keyDER, err := x509.MarshalECPrivateKey(key)
		must(t, "key", err)
		return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
			pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
	}
	serverCert, serverKey := issue(2, x509.ExtKeyUsageServerAuth)
	clientCert, clientKey := issue(3, x509.ExtKeyUsageClientAuth)
	pair, err := tls.X509KeyPair(serverCert, serverKey)
	must(t, "server key pair", err)
	f := TLSFiles{
		CA:    filepath.Join(dir, "ca.pem"),
		Cert:  filepath.Join(dir, "client.pem"),
		Key:   filepath.Join(dir, "client-key.pem"),
		ca:    ca,
		caKey: caKey,
		Server: &tls.Config{
			Certificates: []tls.Certificate{pair},
			ClientCAs:    pool,
			ClientAuth:   tls.RequireAndVerifyClientCert,
			MinVersion:   tls.VersionTLS12,
		},
	}
	for path, data := range map[string][]byte{
		f.CA:   pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		f.Cert: clientCert,
		f.Key:  clientKey,
	} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatalf("notifytest: %v", err)
		}
	}
	return f
}

// WriteServerPair issues a new server certificate for 127.0.0.1 and
// localhost, signed by the CA, with a random serial number, and writes it
// and its key as PEM to certPath and keyPath (mode 0600). It returns the
// certificate.
func (f TLSFiles) WriteServerPair(t testing.TB, certPath, keyPath string) *x509.Certificate {
	t.Helper()
	key := newKey(t)
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	must(t, "serial number", err)
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "localhost"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:     []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, f.ca, &key.PublicKey, f.caKey)
	must(t, "server certificate", err)
	cert, err := x509.ParseCertificate(der)
	must(t, "server certificate", err)
	keyDER, err := x509.MarshalECPrivateKey(key)
	must(t, "key", err)
	for path, data := range map[string][]byte{
		certPath: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyPath:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatalf("notifytest: %v", err)
		}
	}
	return cert
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(t, "key", err)
	return key
}

// must fails t, saying what could not be made, when err is not nil.
func must(t testing.TB, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("notifytest: %s: %v", what, err)
	}
}
