package main

import (
	"bytes"
	"context"
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
)

// opsTimeout bounds one request to the running relay.
const opsTimeout = 30 * time.Second

// opsClient calls the administration endpoints of the running relay's ops
// listener (dead letters, silences, the report) with RELAY_ADMIN_TOKEN: the state file
// has one writer, the relay itself.
type opsClient struct {
	base, token string
}

// opsTarget is where a command sends its requests: the --addr and --tenant
// flags.
type opsTarget struct {
	addr, tenant *string
}

// opsFlags adds --addr and --tenant to fs.
func opsFlags(fs *flag.FlagSet) *opsTarget {
	return &opsTarget{
		addr: fs.String("addr", "", "the relay's ops listener, host:port or URL (default from RELAY_LISTEN, on 127.0.0.1)"),
		tenant: fs.String("tenant", "", "the tenant, when the relay serves a tenants file (RELAY_TENANTS_FILE): "+
			"its id there"),
	}
}

// client returns a client of the target's ops listener and tenant.
func (t *opsTarget) client() (*opsClient, int, error) {
	c, code, err := newOpsClient(*t.addr)
	if err == nil && *t.tenant != "" {
		c.base += "/tenants/" + url.PathEscape(*t.tenant)
	}
	return c, code, err
}

// newOpsClient returns a client of the ops listener at addr (the --addr
// flag; empty: RELAY_LISTEN) with the token of RELAY_ADMIN_TOKEN. On error
// it also returns the exit code: 1 without a token, 2 for a bad address.
func newOpsClient(addr string) (*opsClient, int, error) {
	token := os.Getenv("RELAY_ADMIN_TOKEN")
	if token == "" {
		return nil, 1, errors.New("RELAY_ADMIN_TOKEN is not set: set it to the running relay's RELAY_ADMIN_TOKEN")
	}
	base, err := opsBaseURL(addr)
	if err != nil {
		return nil, 2, err
	}
	return &opsClient{base: base, token: token}, 0, nil
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
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("the relay's ops listener at %s does not answer: %w", c.base, err)
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("reading the answer: %w", err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, &opsError{Status: resp.StatusCode, Body: answer}
	}
	return answer, nil
}

// opsBaseURL returns the URL of the ops listener: addr when given (host:port
// or a URL), else RELAY_LISTEN (default :9477) with an empty or wildcard host
// taken as 127.0.0.1.
func opsBaseURL(addr string) (string, error) {
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
	return "http://" + net.JoinHostPort(host, port), nil
}
