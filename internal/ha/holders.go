package ha

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Holder is who holds one tenant's lease, as the lease bucket says.
type Holder struct {
	Tenant  string
	Replica string
	// Since is when the holder acquired the lease, by its clock.
	Since time.Time
}

// Holders reads the lease bucket: who holds each tenant's lease now, in
// tenant order. A tenant nobody holds is not listed.
func (ls *Leases) Holders(ctx context.Context) ([]Holder, error) {
	keys, err := ls.kv.ListKeys(ctx)
	if err != nil {
		return nil, fmt.Errorf("ha: leases %s: listing: %w", ls.bucket, err)
	}
	defer func() { _ = keys.Stop() }()
	var out []Holder
	for key := range keys.Keys() {
		e, err := ls.kv.Get(ctx, key)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue // released meanwhile
		}
		if err != nil {
			return nil, fmt.Errorf("ha: lease %s/%s: reading: %w", ls.bucket, key, err)
		}
		var v leaseValue
		if err := json.Unmarshal(e.Value(), &v); err != nil {
			return nil, fmt.Errorf("ha: lease %s/%s: %w", ls.bucket, key, err)
		}
		since, _ := time.Parse(time.RFC3339Nano, v.Acquired)
		out = append(out, Holder{Tenant: key, Replica: v.Holder, Since: since})
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("ha: leases %s: listing: %w", ls.bucket, err)
	}
	slices.SortFunc(out, func(a, b Holder) int { return strings.Compare(a.Tenant, b.Tenant) })
	return out, nil
}

// View is what an assigner knows of the replicas, for operators: the live
// replicas and who holds each tenant's lease.
type View struct {
	// Joined says the assigner joined the replicas; until then Live and
	// Holders are empty.
	Joined bool
	// Live are the ids of the live replicas, this one included, sorted.
	Live []string
	// Holders are the leases held now, in tenant order.
	Holders []Holder
}

// View reads the live replicas and the lease bucket. An error reading the
// bucket comes with the live replicas.
func (a *Assigner) View(ctx context.Context) (View, error) {
	a.mu.Lock()
	leases, members := a.leases, a.members
	a.mu.Unlock()
	if members == nil {
		return View{}, nil
	}
	v := View{Joined: true, Live: members.Live()}
	var err error
	v.Holders, err = leases.Holders(ctx)
	return v, err
}
