package guard

import (
	"net/http/httptest"
	"net/netip"
	"strconv"
	"testing"
	"time"
)

// TestProxiesBelieveOnlyTrustedPeers: the forwarding headers change the
// client, scheme and host only when the peer is a trusted proxy, and only
// the family the proxies write (RELAY_FORWARDED_HEADER) is read.
func TestProxiesBelieveOnlyTrustedPeers(t *testing.T) {
	xf, err := ParseProxies("10.0.0.0/8, 192.168.1.7")
	if err != nil {
		t.Fatal(err)
	}
	fw := Proxies{Nets: xf.Nets, Forwarded: true}
	for _, tc := range []struct {
		name                 string
		p                    Proxies
		peer                 string
		headers              map[string]string
		client, scheme, host string
	}{
		{"untrusted peer", xf, "203.0.113.9:5000", map[string]string{"X-Forwarded-For": "1.2.3.4", "X-Forwarded-Proto": "https", "X-Forwarded-Host": "evil.example"},
			"203.0.113.9", "http", "relay.example.com"},
		{"untrusted peer, Forwarded", fw, "203.0.113.9:5000", map[string]string{"Forwarded": "for=1.2.3.4;proto=https;host=evil.example"},
			"203.0.113.9", "http", "relay.example.com"},
		{"trusted proxy", xf, "10.1.2.3:5000", map[string]string{"X-Forwarded-For": "1.2.3.4, 203.0.113.5, 192.168.1.7", "X-Forwarded-Proto": "https", "X-Forwarded-Host": "console.example.com"},
			"203.0.113.5", "https", "console.example.com"},
		// On e932ec2 the client here was the proxy, 192.168.1.7: Forwarded's
		// for= was not read, and every client of a Forwarded-only proxy
		// shared one throttle bucket.
		{"trusted Forwarded", fw, "192.168.1.7:5000", map[string]string{"Forwarded": `for=198.51.100.1;proto=https;host="relay.example.org", for=10.0.0.1`},
			"198.51.100.1", "https", "relay.example.org"},
		{"Forwarded, IPv6 with a port", fw, "10.0.0.5:5000", map[string]string{"Forwarded": `For="[2001:db8:cafe::17]:4711";Proto=https;Host=relay.example.org`},
			"2001:db8:cafe::17", "https", "relay.example.org"},
		// A client may send the headers itself; a proxy appends its word
		// after theirs. On e932ec2 the first values were read: evil.example
		// and http here.
		{"client's values before the proxy's", xf, "10.1.2.3:5000", map[string]string{"X-Forwarded-For": "6.6.6.6, 203.0.113.5", "X-Forwarded-Proto": "http, https", "X-Forwarded-Host": "evil.example, console.example.com"},
			"203.0.113.5", "https", "console.example.com"},
		{"client's Forwarded before the proxy's", fw, "10.1.2.3:5000", map[string]string{"Forwarded": `for=6.6.6.6;proto=http;host=evil.example, for=203.0.113.5;proto=https;host="console.example.com"`},
			"203.0.113.5", "https", "console.example.com"},
		{"Forwarded through two proxies", fw, "10.1.2.3:5000", map[string]string{"Forwarded": `for=203.0.113.5;proto=https;host="console.example.com", for=10.9.9.9;proto=http;host=relay.svc`},
			"203.0.113.5", "https", "console.example.com"},
		{"Forwarded, an obfuscated client", fw, "10.1.2.3:5000", map[string]string{"Forwarded": `for=_hidden;proto=https;host="a;b,c.example"`},
			"10.1.2.3", "https", "a;b,c.example"},
		// A proxy writes one family and passes the other on as the client
		// sent it: on 258a954 a Forwarded-only proxy's client chose its
		// address and host with X-Forwarded-*, and an X-Forwarded proxy's
		// client with Forwarded when it sent no X-Forwarded-For.
		{"a Forwarded proxy, the client's X-Forwarded-*", fw, "10.1.2.3:5000", map[string]string{"Forwarded": `for=203.0.113.5;proto=https;host=relay.example.org`, "X-Forwarded-For": "192.0.2.10", "X-Forwarded-Proto": "http", "X-Forwarded-Host": "localhost"},
			"203.0.113.5", "https", "relay.example.org"},
		{"an X-Forwarded proxy, the client's Forwarded", xf, "10.1.2.3:5000", map[string]string{"Forwarded": `for=192.0.2.10;proto=http;host=localhost`, "X-Forwarded-Proto": "https", "X-Forwarded-Host": "relay.example.org"},
			"10.1.2.3", "https", "relay.example.org"},
		{"trusted, no headers", xf, "[::ffff:10.0.0.1]:5000", nil, "10.0.0.1", "http", "relay.example.com"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "http://relay.example.com/console/", nil)
			r.RemoteAddr = tc.peer
			for k, v := range tc.headers {
				r.Header.Set(k, v)
			}
			if got := tc.p.Client(r); got != tc.client {
				t.Errorf("client %q, want %q", got, tc.client)
			}
			if got := tc.p.Scheme(r); got != tc.scheme {
				t.Errorf("scheme %q, want %q", got, tc.scheme)
			}
			if got := tc.p.Host(r); got != tc.host {
				t.Errorf("host %q, want %q", got, tc.host)
			}
		})
	}
	if _, err := ParseProxies("10.0.0.0/8, ingress"); err == nil {
		t.Error("ParseProxies accepted a name")
	}
}

// try makes one attempt from addr with a right or wrong token, and
// reports whether the throttle let it check the token.
func try(th *Throttle, addr string, right bool) bool {
	a, _, ok := th.Allow(addr, "api")
	if !ok {
		return false
	}
	if right {
		a.Right()
	} else {
		a.Wrong()
	}
	return true
}

// TestThrottleRefusesAfterTheBurstAndRefills: an address may fail
// PerAddressBurst times, is then refused until PerAddressEvery has passed,
// other addresses go on; right tokens take nothing; an IPv6 client is one
// /64.
func TestThrottleRefusesAfterTheBurstAndRefills(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	th := NewThrottle(func() time.Time { return now }, nil, nil)
	for i := range 3 * PerAddressBurst {
		if !try(th, "192.0.2.1", true) {
			t.Fatalf("right token %d refused", i)
		}
	}
	for i := range PerAddressBurst {
		if !try(th, "192.0.2.1", false) {
			t.Fatalf("attempt %d refused within the burst", i)
		}
	}
	_, wait, ok := th.Allow("192.0.2.1", "console")
	if ok || wait <= 0 || wait > PerAddressEvery {
		t.Fatalf("after the burst: ok %v, wait %s; want a refusal of at most %s", ok, wait, PerAddressEvery)
	}
	if !try(th, "192.0.2.2", false) {
		t.Fatal("another address was refused")
	}
	now = now.Add(PerAddressEvery)
	if !try(th, "192.0.2.1", true) {
		t.Fatal("still refused after the bucket refilled one")
	}

	for i := range PerAddressBurst {
		try(th, "2001:db8:1:2::"+strconv.Itoa(i+1), false)
	}
	if try(th, "2001:db8:1:2::ffff", true) {
		t.Fatal("another address of the same /64 was let through")
	}
}

// TestThrottleTakesBeforeTheCheck: attempts from one address sent in
// parallel, none of them checked yet, are let through PerAddressBurst at a
// time, not all of them; right tokens give theirs back. (The throttle of
// e932ec2 took nothing until a wrong token was known: every one of 50
// parallel guesses was checked.)
func TestThrottleTakesBeforeTheCheck(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	th := NewThrottle(func() time.Time { return now }, nil, nil)
	var open []*Attempt
	for range 50 {
		if a, _, ok := th.Allow("192.0.2.1", "console"); ok {
			open = append(open, a)
		}
	}
	if len(open) != PerAddressBurst {
		t.Fatalf("%d of 50 parallel attempts let through, want %d", len(open), PerAddressBurst)
	}
	for _, a := range open {
		a.Right()
		a.Right() // once only
	}
	if th.byAddr[key("192.0.2.1")].tokens != PerAddressBurst || th.overall.tokens != OverallBurst {
		t.Fatalf("after right tokens: the address holds %.1f tokens, the overall bucket %.1f; want both full",
			th.byAddr[key("192.0.2.1")].tokens, th.overall.tokens)
	}
}

// TestThrottleHoldsBackNewAddressesNotKnownOnes: guessing from a new
// address each time is held to the overall bucket (OverallBurst, then one
// per OverallEvery); an address that gave the right token lately, with no
// wrong one since, goes on through it, and an address that did give a
// wrong one does not. (On e932ec2 an address with no bucket skipped the
// overall bucket: 200 new addresses made 200 guesses.)
func TestThrottleHoldsBackNewAddressesNotKnownOnes(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	th := NewThrottle(func() time.Time { return now }, nil, nil)
	if !try(th, "203.0.113.7", true) || !try(th, "203.0.113.8", true) {
		t.Fatal("the operators' first logins were refused")
	}
	guessed := 0
	for i := range 200 {
		if try(th, netip.AddrFrom4([4]byte{198, 51, byte(100 + i/256), byte(i)}).String(), false) {
			guessed++
		}
	}
	if guessed != OverallBurst {
		t.Fatalf("200 new addresses made %d guesses, want the overall burst, %d", guessed, OverallBurst)
	}
	if !try(th, "203.0.113.7", true) {
		t.Fatal("an operator known to hold the right token was locked out by guessing from many addresses")
	}
	if !try(th, "203.0.113.8", false) {
		t.Fatal("a known address's mistyped token was refused")
	}
	if try(th, "203.0.113.8", true) {
		t.Fatal("a known address that gave a wrong token since was let through while the overall bucket is empty")
	}
	if try(th, "192.0.2.99", true) {
		t.Fatal("a new address was let through while the overall bucket is empty")
	}
	now = now.Add(OverallEvery)
	if !try(th, "192.0.2.99", true) {
		t.Fatal("a new address was refused after the overall bucket refilled one")
	}
	now = now.Add(KnownFor)
	for i := range OverallBurst + 1 {
		try(th, netip.AddrFrom4([4]byte{198, 51, 200, byte(i)}).String(), false)
	}
	if try(th, "203.0.113.7", true) {
		t.Fatal("an address known longer than KnownFor ago still skips the overall bucket")
	}
}

// TestThrottleMemoryIsBoundedAndKeepsTheLocked: a flood of new addresses
// keeps at most maxAddresses buckets (past it they share one), and the
// bucket of an address that ran out is not forgotten to make room. (On
// e932ec2 the flood dropped it, and the address guessed again at once.)
func TestThrottleMemoryIsBoundedAndKeepsTheLocked(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	th := NewThrottle(func() time.Time { return now }, nil, nil)
	for range PerAddressBurst {
		try(th, "192.0.2.1", false)
	}
	for i := range 3 * maxAddresses {
		th.overall.tokens = OverallBurst // a flood slow enough for the overall bucket
		try(th, netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}).String(), false)
		now = now.Add(time.Microsecond)
	}
	if n := len(th.byAddr); n > maxAddresses {
		t.Fatalf("the throttle remembers %d addresses, want at most %d", n, maxAddresses)
	}
	if now.Sub(time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)) >= PerAddressEvery {
		t.Fatal("the flood took longer than a refill: the test proves nothing")
	}
	if try(th, "192.0.2.1", true) {
		t.Fatal("the address that ran out was forgotten in the flood and let through")
	}
	now = now.Add(PerAddressBurst*PerAddressEvery + time.Second)
	try(th, "192.0.2.2", true)
	if n := len(th.byAddr); n > 2 {
		t.Fatalf("once every bucket refilled, a new address left %d addresses remembered, want the full ones forgotten", n)
	}
}
