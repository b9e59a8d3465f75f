package service

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// certCheckEvery is how often, at most, the certificate and key files of
// the ops listener are looked at for a change: at a TLS handshake, with a
// stat of each file.
const certCheckEvery = time.Second

// CertFiles serves the certificate of a certificate file and a key file
// (RELAY_TLS_CERT_FILE, RELAY_TLS_KEY_FILE) and loads the pair again when
// either file changes, without a restart. It looks at the files at a
// handshake, at most every certCheckEvery: a change of either file's
// identity (a symlink swapped to a new file, as Kubernetes does when it
// rotates a mounted Secret), modification time or size. A new pair that
// does not load is logged and counted once, and the pair loaded before is
// served on.
type CertFiles struct {
	certFile, keyFile string
	log               *slog.Logger
	reloads           *prometheus.CounterVec
	now               func() time.Time
	every             time.Duration

	mu      sync.Mutex
	cert    *tls.Certificate
	seen    [2]os.FileInfo // the files as last looked at
	checked time.Time
}

// LoadCertFiles loads the pair of certFile and keyFile, or says which file
// does not load and why. The metric relay_tls_reloads_total, registered on
// reg, counts the reloads that follow by result (applied, refused); the
// logger gets a line for each.
func LoadCertFiles(certFile, keyFile string, reg prometheus.Registerer, log *slog.Logger) (*CertFiles, error) {
	c := &CertFiles{certFile: certFile, keyFile: keyFile, log: log, now: time.Now, every: certCheckEvery,
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "relay_tls_reloads_total",
			Help: "Reloads of the ops listener's certificate and key files after they changed, by result (applied, refused).",
		}, []string{"result"})}
	seen, err := c.stat()
	if err != nil {
		return nil, err
	}
	cert, err := c.load()
	if err != nil {
		return nil, err
	}
	c.cert, c.seen, c.checked = cert, seen, c.now()
	for _, r := range []string{"applied", "refused"} {
		c.reloads.WithLabelValues(r)
	}
	if err := reg.Register(c.reloads); err != nil {
		return nil, fmt.Errorf("ops: TLS metrics: %w", err)
	}
	if err := reg.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "relay_tls_certificate_expiry_timestamp_seconds",
		Help: "When the certificate the ops listener serves expires (its NotAfter), in seconds since the epoch.",
	}, c.notAfter)); err != nil {
		return nil, fmt.Errorf("ops: TLS metrics: %w", err)
	}
	return c, nil
}

// Config returns the TLS configuration of the ops listener: TLS 1.2 or
// later, with the certificate of the files as they are at each handshake.
func (c *CertFiles) Config() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: c.getCertificate}
}

// getCertificate returns the pair to present, loaded again first when the
// files changed since they were last looked at.
func (c *CertFiles) getCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if now.Sub(c.checked) < c.every {
		return c.cert, nil
	}
	c.checked = now
	seen, err := c.stat()
	if err != nil {
		if c.seen[0] != nil {
			c.refused(err)
			c.seen = [2]os.FileInfo{}
		}
		return c.cert, nil
	}
	if c.seen[0] != nil && sameFile(c.seen[0], seen[0]) && sameFile(c.seen[1], seen[1]) {
		return c.cert, nil
	}
	c.seen = seen
	cert, err := c.load()
	if err != nil {
		c.refused(err)
		return c.cert, nil
	}
	c.cert = cert
	c.reloads.WithLabelValues("applied").Inc()
	c.log.Info("ops listener: certificate reloaded", "cert_file", c.certFile, "key_file", c.keyFile,
		"subject", cert.Leaf.Subject.String(), "serial", cert.Leaf.SerialNumber.String(), "not_after", cert.Leaf.NotAfter)
	return c.cert, nil
}

// refused logs and counts a new pair that did not load.
func (c *CertFiles) refused(err error) {
	c.reloads.WithLabelValues("refused").Inc()
	c.log.Error("ops listener: the changed certificate files do not load; serving the certificate loaded before",
		"err", err, "serial", c.cert.Leaf.SerialNumber.String(), "not_after", c.cert.Leaf.NotAfter)
}

// notAfter is when the certificate served now expires, in seconds since
// the epoch.
func (c *CertFiles) notAfter() float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return float64(c.cert.Leaf.NotAfter.Unix())
}

// stat looks at both files, through symlinks.
func (c *CertFiles) stat() ([2]os.FileInfo, error) {
	var out [2]os.FileInfo
	for i, f := range []struct{ name, path string }{{"RELAY_TLS_CERT_FILE", c.certFile}, {"RELAY_TLS_KEY_FILE", c.keyFile}} {
		fi, err := os.Stat(f.path)
		if err != nil {
			return out, fmt.Errorf("%s=%s: %w", f.name, f.path, err)
		}
		out[i] = fi
	}
	return out, nil
}

// load reads and parses the pair, naming the file at fault.
func (c *CertFiles) load() (*tls.Certificate, error) {
	certPEM, err := os.ReadFile(c.certFile)
	if err != nil {
		return nil, fmt.Errorf("RELAY_TLS_CERT_FILE=%s: %w", c.certFile, err)
	}
	keyPEM, err := os.ReadFile(c.keyFile)
	if err != nil {
		return nil, fmt.Errorf("RELAY_TLS_KEY_FILE=%s: %w", c.keyFile, err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("RELAY_TLS_CERT_FILE=%s and RELAY_TLS_KEY_FILE=%s do not make a certificate and its key (PEM): %w",
			c.certFile, c.keyFile, err)
	}
	if cert.Leaf == nil {
		if cert.Leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return nil, fmt.Errorf("RELAY_TLS_CERT_FILE=%s: %w", c.certFile, err)
		}
	}
	return &cert, nil
}

// sameFile reports whether a and b are the same file, unchanged: the same
// identity (device and inode), modification time and size.
func sameFile(a, b os.FileInfo) bool {
	return os.SameFile(a, b) && a.ModTime().Equal(b.ModTime()) && a.Size() == b.Size()
}
