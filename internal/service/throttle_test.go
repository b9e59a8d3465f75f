package service

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestOpsAPIThrottlesBearerGuessing: wrong Bearer tokens from one address
// get 401 five times, then 429 with Retry-After, the right token too while
// the bucket is empty; the refusals are counted in
// relay_auth_throttled_total and the console's login shares the bucket.
// On the code before the fix all 200 got an immediate 401. The probes and
// the metrics answer any Host (kubelets and Prometheus use pod addresses
// and Service names); the console refuses a host name that is not its own.
func TestOpsAPIThrottlesBearerGuessing(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the service")
	}
	s := startAckService(t)
	c := &http.Client{Timeout: 10 * time.Second}
	call := func(path, token, host string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", "http://"+s.ops+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		if host != "" {
			req.Host = host
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	for _, path := range []string{"/healthz", "/metrics"} {
		if resp, _ := call(path, "", "relay.attacker.net"); resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s with another Host: %s, want 200", path, resp.Status)
		}
	}
	if resp, body := call("/console/login", "", "relay.attacker.net"); resp.StatusCode != http.StatusMisdirectedRequest {
		t.Errorf("GET /console/login with a rebinding Host: %s, want 421: %s", resp.Status, body)
	}
	if resp, _ := call("/alarms", ackAdminToken, "relay.attacker.net"); resp.StatusCode != http.StatusOK {
		t.Errorf("GET /alarms with the token and another Host: %s, want 200 (the ops API reads no cookie)", resp.Status)
	}
	var unauthorized, throttled int
	for i := range 200 {
		resp, _ := call("/alarms", "guess-"+strconv.Itoa(i)+"-0123456789", "")
		switch resp.StatusCode {
		case http.StatusUnauthorized:
			unauthorized++
		case http.StatusTooManyRequests:
			throttled++
			if n, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || n < 1 {
				t.Fatalf("429 with Retry-After %q, want whole seconds", resp.Header.Get("Retry-After"))
			}
		default:
			t.Fatalf("wrong token %d: %s", i, resp.Status)
		}
	}
	if unauthorized > 6 || throttled < 190 {
		t.Fatalf("200 wrong tokens: %d answered 401, %d 429; want at most 6 checked and the rest refused", unauthorized, throttled)
	}
	if resp, _ := call("/alarms", ackAdminToken, ""); resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("the right token while throttled: %s, want 429", resp.Status)
	}
	if resp, _ := call("/tenants/default/alarms", ackAdminToken, ""); resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("the right token under /tenants/ while throttled: %s, want 429", resp.Status)
	}
	_, metrics := call("/metrics", "", "")
	if !strings.Contains(metrics, `relay_auth_throttled_total{endpoint="api"`) {
		t.Errorf("no relay_auth_throttled_total{endpoint=\"api\"} in /metrics")
	}
}
