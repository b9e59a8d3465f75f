package ha

import "hash/fnv"

// Owner returns the member that owns tenant by rendezvous (highest random
// weight) hashing: the member with the highest weight for the pair, ties
// going to the smaller id. Every replica that sees the same members picks the
// same owner, and a member that joins or leaves moves only the tenants it
// gains or had. It returns "" when members is empty.
func Owner(tenant string, members []string) string {
	var (
		owner string
		best  uint64
	)
	for _, m := range members {
		w := weight(m, tenant)
		if owner == "" || w > best || (w == best && m < owner) {
			owner, best = m, w
		}
	}
	return owner
}

// weight is FNV-1a 64 of member, a zero byte and tenant, mixed by the
// finaliser of MurmurHash3: FNV alone leaves ids that differ in their last
// character (relay-0, relay-1) with weights too alike to spread tenants
// evenly.
func weight(member, tenant string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(member))
	h.Write([]byte{0})
	h.Write([]byte(tenant))
	x := h.Sum64()
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	return x
}
