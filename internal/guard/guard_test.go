package guard

import (
	"net/http/httptest"
	"net/netip"
	"strconv"
	"testing"
	"time"
)

// TestProxiesBelieveOnlyTrustedPeers: the forwarding headers change the
// client, scheme and host only when the peer is a trusted proxy.
func TestProxiesBelieveOnlyTrustedPeers(t *testing.T) {
	p, err := ParseProxies("10.0.0.0/8, 192.168.1.7")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, peer           string
		headers              map[string]string
		client, scheme, host string
	}{
		{"untrusted peer", "203.0.113.9:5000", map[string]string{"X-Forwarded-For": "1.2.3.4", "X-Forwarded-Proto": "https", "X-Forwarded-Host": "evil.example"},
			"203.0.113.9", "http", "relay.example.com"},
		{"trusted proxy", "10.1.2.3:5000", map[string]string{"X-Forwarded-For": "1.2.3.4, 203.0.113.5, 192.168.1.7", "X-Forwarded-Proto": "https", "X-Forwarded-Host": "console.example.com"},
			"203.0.113.5", "https", "console.example.com"},
		{"trusted Forwarded", "192.168.1.7:5000", map[string]string{"Forwarded": `for=198.51.100.1;proto=https;host="relay.example.org", for=10.0.0.1`},
			"192.168.1.7", "https", "relay.example.org"},
		{"trusted, no headers", "[::ffff:10.0.0.1]:5000", nil, "10.0.0.1", "http", "relay.example.com"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "http://relay.example.com/console/", nil)
			r.RemoteAddr = tc.peer
			for k, v := range tc.headers {
				r.Header.Set(k, v)
			}
			if got := p.Client(r); got != tc.client {
				t.Errorf("client %q, want %q", got, tc.client)
			}
			if got := p.Scheme(r); got != tc.scheme {
				t.Errorf("scheme %q, want %q", got, tc.scheme)
			}
			if got := p.Host(r); got != tc.host {
				t.Errorf("host %q, want %q", got, tc.host)
			}
		})
	}
	if _, err := ParseProxies("10.0.0.0/8, ingress"); err == nil {
		t.Error("ParseProxies accepted a name")
	}
}

// TestThrottleRefusesAfterTheBurstAndRefills: an address may fail
// PerAddressBurst times, is then refused until PerAddressEvery has passed,
// other addresses go on; the overall bucket stops every address that
// failed lately but not one that did not (an operator with the right
// token is not locked out by guessing from many addresses); an IPv6
// client is one /64.
func TestThrottleRefusesAfterTheBurstAndRefills(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	th := NewThrottle(func() time.Time { return now }, nil, nil)
	for i := range PerAddressBurst {
		if _, ok := th.Allow("192.0.2.1", "console"); !ok {
			t.Fatalf("attempt %d refused within the burst", i)
		}
		th.Fail("192.0.2.1", "console")
	}
	wait, ok := th.Allow("192.0.2.1", "console")
	if ok || wait <= 0 || wait > PerAddressEvery {
		t.Fatalf("after the burst: ok %v, wait %s; want a refusal of at most %s", ok, wait, PerAddressEvery)
	}
	if _, ok := th.Allow("192.0.2.2", "console"); !ok {
		t.Fatal("another address was refused")
	}
	now = now.Add(PerAddressEvery)
	if _, ok := th.Allow("192.0.2.1", "console"); !ok {
		t.Fatal("still refused after the bucket refilled one")
	}

	for i := range PerAddressBurst {
		th.Fail("2001:db8:1:2::"+strconv.Itoa(i+1), "api")
	}
	if _, ok := th.Allow("2001:db8:1:2::ffff", "api"); ok {
		t.Fatal("another address of the same /64 was let through")
	}

	th = NewThrottle(func() time.Time { return now }, nil, nil)
	for i := range OverallBurst {
		th.Fail("198.51.100."+strconv.Itoa(i), "api")
	}
	if _, ok := th.Allow("203.0.113.77", "api"); !ok {
		t.Fatal("after the overall burst an address that never failed was refused: guessing from many addresses locks out the operators")
	}
	th.Fail("203.0.113.77", "api")
	// Its wrong token took the overall bucket below zero: two refills.
	if wait, ok := th.Allow("203.0.113.77", "api"); ok || wait <= 0 || wait > 2*OverallEvery {
		t.Fatalf("after the overall burst an address that failed once: ok %v, wait %s; want refused for at most %s", ok, wait, 2*OverallEvery)
	}
	if _, ok := th.Allow("198.51.100.1", "api"); ok {
		t.Fatal("after the overall burst an address that failed once before it was let through")
	}
}

// TestThrottleMemoryIsBounded: a flood of addresses keeps at most
// maxAddresses buckets.
func TestThrottleMemoryIsBounded(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	th := NewThrottle(func() time.Time { return now }, nil, nil)
	for i := range 3 * maxAddresses {
		ip := [4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}
		th.Fail(netip.AddrFrom4(ip).String(), "api")
		now = now.Add(time.Millisecond)
	}
	if n := len(th.byAddr); n > maxAddresses {
		t.Fatalf("the throttle remembers %d addresses, want at most %d", n, maxAddresses)
	}
}
