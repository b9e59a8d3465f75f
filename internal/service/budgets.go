package service

import (
	"sync"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/config"
	"github.com/relay-energy/relay/internal/opendata"
)

// hostBudgets are the request budgets of the upstream hosts that the tenants
// of a tenants file reach. The upstream limits requests per address, not per
// account, so the tenants of one host share one budget, which hands each slot
// to the tenant whose alarms have waited longest (docs/design.md §4, "Tenants
// of one budget").
type hostBudgets struct {
	cfg   config.Config
	clock clock.Clock

	mu     sync.Mutex
	byHost map[string]*opendata.Budget
}

// hostKey is the key of baseURL's address: its host in lower case, and its
// port unless it is the scheme's default (opendata.AddressKey).
func hostKey(baseURL string) string { return opendata.AddressKey(baseURL) }

// get returns the budget of tenant t's upstream host, made at its first
// tenant's start: its limit is the smallest rate limit of the tenants of
// that host (the limit is the address's, so the most careful setting
// holds), and it starts with the starts the host's budget file holds.
func (h *hostBudgets) get(t config.Tenant) (*opendata.Budget, error) {
	key := hostKey(t.Upstream.BaseURL)
	h.mu.Lock()
	defer h.mu.Unlock()
	if b, ok := h.byHost[key]; ok {
		return b, nil
	}
	limit := t.Upstream.RateLimit
	for _, o := range h.cfg.Tenants() {
		if hostKey(o.Upstream.BaseURL) == key && o.Upstream.RateLimit > 0 && (limit <= 0 || o.Upstream.RateLimit < limit) {
			limit = o.Upstream.RateLimit
		}
	}
	b, err := opendata.NewBudget(opendata.BudgetConfig{RateLimit: limit, Clock: h.clock, File: TenantUpstream(h.cfg, t).BudgetFile})
	if err != nil {
		return nil, err
	}
	if h.byHost == nil {
		h.byHost = map[string]*opendata.Budget{}
	}
	h.byHost[key] = b
	return b, nil
}
