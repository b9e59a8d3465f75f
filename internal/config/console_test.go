package config

import (
	"context"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/sethvargo/go-envconfig"
)

// TestConsoleOriginAndTrustedProxies: RELAY_CONSOLE_ORIGIN is read as an
// origin, made canonical, and refused with a path, credentials or another
// scheme; RELAY_TRUSTED_PROXIES as CIDRs and addresses.
func TestConsoleOriginAndTrustedProxies(t *testing.T) {
	c, err := Load(context.Background(), envconfig.MapLookuper(map[string]string{
		"RELAY_CONSOLE_ORIGIN": "HTTPS://Relay.Example.com/", "RELAY_TRUSTED_PROXIES": "10.0.0.0/8, 192.168.1.7,fd00::/8",
	}))
	if err != nil {
		t.Fatal(err)
	}
	want := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.168.1.7/32"), netip.MustParsePrefix("fd00::/8")}
	if c.Console.Origin != "https://relay.example.com" || !slices.Equal(c.Console.Proxies(), want) {
		t.Fatalf("origin %q, proxies %v; want https://relay.example.com and %v", c.Console.Origin, c.Console.Proxies(), want)
	}
	for _, tc := range []struct{ name, value, want string }{
		{"RELAY_CONSOLE_ORIGIN", "relay.example.com", "want the scheme and host"},
		{"RELAY_CONSOLE_ORIGIN", "ftp://relay.example.com", "want the scheme and host"},
		{"RELAY_CONSOLE_ORIGIN", "https://relay.example.com/console/", "without a path"},
		{"RELAY_CONSOLE_ORIGIN", "https://ops:s3cret-pass@relay.example.com", "without a path, query or credentials"},
		{"RELAY_TRUSTED_PROXIES", "10.0.0.0/8, ingress", `"ingress" is not a CIDR`},
	} {
		_, err := Load(context.Background(), envconfig.MapLookuper(map[string]string{tc.name: tc.value}))
		if err == nil || !strings.Contains(err.Error(), tc.name) || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "s3cret-pass") {
			t.Errorf("%s=%s: %v; want a problem naming it and saying %q, no password", tc.name, tc.value, err, tc.want)
		}
	}
}
