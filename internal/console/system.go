package console

import (
	"net/http"
	"time"

	"github.com/relay-energy/relay/internal/learn"
	"github.com/relay-energy/relay/internal/poller"
)

// System is what the System page shows: facts of the process (the tenants
// it serves, the replicas and their leases) and of the console's tenant
// (its upstream budget, sinks and rules). The service builds it; it must
// hold no secret: sinks are named by name, type and a redacted target, and
// error texts are cleaned of the configuration's secrets.
type System struct {
	// Tenant is the id of the console's tenant.
	Tenant string
	// Tenants are the tenants the process serves now, in id order, when it
	// serves a tenants file; empty for the one tenant of the environment.
	Tenants []string
	// Replicas are the replicas sharing state in NATS JetStream.
	Replicas Replicas
	// Upstream is the request budget's use.
	Upstream Upstream
	// Shared is how the budget is shared with the other tenants of the
	// same upstream address; Tenants is 1 or less for a budget of its own.
	Shared SharedBudget
	// Learned is what the poller learned of the upstream from its answers
	// (docs/design.md §4).
	Learned learn.Facts
	// Sinks are the sinks of the rules in force, in file order.
	Sinks []Sink
	// Rules are the rules in force.
	Rules Rules
}

// Replicas are what the process knows of its fellow replicas.
type Replicas struct {
	// Replicated says the state is in NATS JetStream, shared by replicas;
	// false: this process is standalone, with its state in a local file.
	Replicated bool
	// ID is this replica's id (RELAY_REPLICA_ID).
	ID string
	// Joined says this replica joined the others; Live and Leases are
	// empty until then.
	Joined bool
	// Live are the ids of the live replicas, this one included, sorted.
	Live []string
	// Leases are the tenants' leases held now, in tenant order.
	Leases []Lease
	// Error says why the leases could not be read, "" when they were.
	Error string
}

// Lease is who holds one tenant's lease.
type Lease struct {
	Tenant, Replica string
	// Since is when the replica acquired it.
	Since time.Time
}

// Upstream is the upstream request budget of the tenant and its use, as
// the poller keeps it; the service cleans LastError of every secret.
type Upstream = poller.Usage

// SharedBudget is how the tenant shares its upstream address's budget
// (docs/design.md §4, "Tenants of one budget").
type SharedBudget struct {
	// Tenants counts the tenants that share it, this one included.
	Tenants int
	// Schedule is how it hands out its slots (latency or fifo).
	Schedule string
	// Floor is how long a tenant may go unread before it is served first;
	// ReadBound the longest a tenant waits between two reads.
	Floor, ReadBound time.Duration
}

// Sink is one sink of the rules in force and how its deliveries go.
type Sink struct {
	// Name and Type are as the rules file writes them; Target is where it
	// sends (route.Sink.Target), every URL in it cut to its scheme and
	// host (HideURLPaths): a webhook's path may be its secret.
	Name, Type, Target string
	// Depth counts the entries waiting in its outbox, DeadLetters those
	// given up on, and Discarded the dead letters discarded since the
	// process started because the sink held more than the dead-letter
	// limit (RELAY_DEAD_LETTER_LIMIT).
	Depth, DeadLetters, Discarded int
	// LastDelivered is when it last took an entry; LastFailure when an
	// attempt last failed and LastError why (cleaned). Zero or empty when
	// not seen since the process started.
	LastDelivered, LastFailure time.Time
	LastError                  string
}

// Rules are the rules in force and when they were loaded.
type Rules struct {
	// Path is the rules file; Digest the SHA-256 of the contents in force,
	// in hex.
	Path, Digest string
	// LoadedAt is when the rules in force were loaded.
	LoadedAt time.Time
	// ReloadError says why the latest reload was refused ("" when the
	// file in force is the file on disk), and ReloadFailedAt when.
	ReloadError    string
	ReloadFailedAt time.Time
	// The counts of routes, sinks, active silences and maintenance
	// windows.
	Routes, Sinks, Silences, Maintenance int
	// Table is the routing table, as relay check prints it.
	Table []Route
}

// Route is one row of the routing table.
type Route struct {
	Name, Match string
	To          []string
	Continue    bool
	// Options are the alarm management options it sets (route.Route.Options).
	Options []string
}

// systemPage is what the System page shows.
type systemPage struct {
	frame
	Now time.Time
	System
	// Off says the service gave the console no System (Options.System).
	Off bool
}

// registerSystem adds the System page's route.
func (c *Console) registerSystem() {
	c.mux.HandleFunc("GET /console/system", c.system)
}

// system serves the System page: read only, for viewers and
// administrators alike.
func (c *Console) system(w http.ResponseWriter, r *http.Request) {
	f, ok := c.page(w, r, "system")
	if !ok {
		return
	}
	p := systemPage{frame: f, Now: c.o.Now(), Off: c.o.System == nil}
	if c.o.System != nil {
		p.System = c.o.System(r.Context())
	}
	render(w, "system", p)
}
