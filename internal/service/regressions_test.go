package service

import (
	"testing"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/config"
)

// TestTenantsOfOneHostShareOneBudgetWhateverTheirURLsSpelling: the upstream
// limits requests per address, so tenants whose base URLs name one host
// must share one budget, however the URL is spelled: with the scheme's
// default port written out or not, the host in capitals. Two budgets for
// one address let the process make twice the limit's requests there.
func TestTenantsOfOneHostShareOneBudgetWhateverTheirURLsSpelling(t *testing.T) {
	var cfg config.Config
	cfg.TenantsFile = "tenants.yaml"
	cfg.Store.Dir = t.TempDir()
	h := &hostBudgets{cfg: cfg, clock: clock.Real()}
	tenant := func(id, baseURL string) config.Tenant {
		var tn config.Tenant
		tn.ID, tn.Upstream.BaseURL = id, baseURL
		return tn
	}
	first, err := h.get(tenant("acme", "https://opendata.example.com"))
	if err != nil {
		t.Fatal(err)
	}
	for i, u := range []string{
		"https://opendata.example.com:443",
		"https://OpenData.Example.com:443/",
		"HTTPS://opendata.example.com/api",
	} {
		b, err := h.get(tenant("t"+string(rune('a'+i)), u))
		if err != nil {
			t.Fatal(err)
		}
		if b != first {
			t.Errorf("a tenant of %s got a budget of its own beside the tenants of https://opendata.example.com: one address, two budgets", u)
		}
	}
	// Another port is another service.
	if b, err := h.get(tenant("other", "https://opendata.example.com:8443")); err != nil || b == first {
		t.Errorf("a tenant of port 8443 shares the budget of port 443 (err %v)", err)
	}
}
