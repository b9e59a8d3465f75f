package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/relay-energy/relay/internal/urlpath"
)

// opsTimeout bounds one request to the running relay.
const opsTimeout = 30 * time.Second

// opsClient calls the administration endpoints of the running relay's ops
// listener (dead letters, silences, the report) with RELAY_ADMIN_TOKEN: the state file
// has one writer, the relay itself.
type opsClient struct {
	base, token string
	http        *http.Client
}

// opsTarget is where a command sends its requests: the --addr and --tenant
// flags.
type opsTarget struct {
	addr, tenant *string
}

// opsFlags adds --addr and --tenant to fs.
func opsFlags(fs *flag.FlagSet) *opsTarget {
	return &opsTarget{
		addr: fs.String("addr", "", "the relay's ops listener, host:port or URL, https:// when it serves TLS (default from RELAY_LISTEN, on 127.0.0.1; https with RELAY_TLS_CA_FILE set)"),
		tenant: fs.String("tenant", "", "the tenant, when the relay serves a tenants file (RELAY_TENANTS_FILE): "+
			"its id there"),
	}
}

// client returns a client of the target's ops listener and tenant.
func (t *opsTarget) client() (*opsClient, int, error) {
	c, code, err := newOpsClient(*t.addr)
	if err == nil && *t.tenant != "" {
		c.base += "/tenants/" + urlpath.Segment(*t.tenant)
	}
	return c, code, err
}

// newOpsClient returns a client of the ops listener at addr (the --addr
// flag; empty: RELAY_LISTEN) with the token of RELAY_ADMIN_TOKEN. It calls
// over HTTPS when addr is an https:// URL, or, given host:port, when
// RELAY_TLS_CA_FILE or RELAY_TLS_CERT_FILE is set, trusting the system's
// roots and the certificates of those files. On error it also returns the
// exit code: 1 without a token, 2 for a bad address or CA file.
func newOpsClient(addr string) (*opsClient, int, error) {
	token := os.Getenv("RELAY_ADMIN_TOKEN")
	if token == "" {
		return nil, 1, errors.New("RELAY_ADMIN_TOKEN is not set: set it to the running relay's RELAY_ADMIN_TOKEN")
	}
	caFile, certFile := os.Getenv("RELAY_TLS_CA_FILE"), os.Getenv("RELAY_TLS_CERT_FILE")
	base, err := opsBaseURL(addr, caFile != "" || certFile != "")
	if err != nil {
		return nil, 2, err
	}
	c := &opsClient{base: base, token: token, http: http.DefaultClient}
	if strings.HasPrefix(base, "https://") {
		roots, err := opsRoots(caFile, certFile)
		if err != nil {
			return nil, 2, err
		}
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.TLSClientConfig = &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
		c.http = &http.Client{Transport: tr}
	}
	return c, 0, nil
}

// opsRoots returns the certificates an HTTPS ops listener is verified with:
// the system's roots, those of caFile (RELAY_TLS_CA_FILE) and the
// certificate of certFile (RELAY_TLS_CERT_FILE, the relay's own, when the
// command runs beside it), when set.
func opsRoots(caFile, certFile string) (*x509.CertPool, error) {
	roots, err := x509.SystemCertPool()
	if err != nil {
		roots = x509.NewCertPool()
	}
	for _, f := range []struct{ name, path string }{{"RELAY_TLS_CA_FILE", caFile}, {"RELAY_TLS_CERT_FILE", certFile}} {
		if f.path == "" {
			continue
		}
		pem, err := os.ReadFile(f.path)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f.name, err)
		}
		if !roots.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s=%s: no PEM certificate in it: want the CA certificate (or the self-signed certificate) the ops listener's certificate is verified with", f.name, f.path)
		}
	}
	return roots, nil
}

// opsError is an answer of the ops listener other than 2xx.
type opsError struct {
	Status int
	Body   []byte
}

func (e *opsError) Error() string {
	return fmt.Sprintf("HTTP %d: %s", e.Status, strings.TrimSpace(string(e.Body)))
}

// call sends method to path with the query q and, unless body is nil, body
// as JSON, and returns the answer of a 2xx; any other status is an
// *opsError.
func (c *opsClient) call(ctx context.Context, method, path string, q url.Values, body any) ([]byte, error) {
	u := c.base + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	ctx, cancel := context.WithTimeout(ctx, opsTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if verr := (*tls.CertificateVerificationError)(nil); errors.As(err, &verr) {
		return nil, fmt.Errorf("the relay's ops listener at %s: its certificate is not trusted (%v): set RELAY_TLS_CA_FILE "+
			"to the CA certificate that signed it (or to the certificate itself, when self-signed)", c.base, verr.Err)
	}
	if err != nil {
		return nil, fmt.Errorf("the relay's ops listener at %s does not answer: %w", c.base, err)
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("reading the answer: %w", err)
	}
	if resp.StatusCode == http.StatusBadRequest && strings.Contains(string(answer), "HTTP request to an HTTPS server") {
		return nil, fmt.Errorf("the relay's ops listener at %s serves HTTPS: set RELAY_TLS_CA_FILE to the CA certificate "+
			"that signed its certificate, or give --addr https://HOST:PORT", c.base)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, &opsError{Status: resp.StatusCode, Body: answer}
	}
	return answer, nil
}

// opsBaseURL returns the URL of the ops listener: addr when given (host:port
// or a URL), else RELAY_LISTEN (default :9477) with an empty or wildcard host
// taken as 127.0.0.1; a host:port is reached over HTTPS when https is set.
func opsBaseURL(addr string, https bool) (string, error) {
	if strings.HasPrefix(addr, "http://") || strings.HasPrefix(addr, "https://") {
		return strings.TrimRight(addr, "/"), nil
	}
	if addr == "" {
		addr = os.Getenv("RELAY_LISTEN")
		if addr == "" {
			addr = ":9477"
		}
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("--addr %q: want host:port or a URL", addr)
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1"
	}
	scheme := "http://"
	if https {
		scheme = "https://"
	}
	return scheme + net.JoinHostPort(host, port), nil
}
