package service

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/route"
)

// Rules holds the rules in force and swaps them when the file changes. A
// file that does not load is refused and the rules in force are kept, so a
// typo in a ConfigMap never silences a pager.
type Rules struct {
	path   string
	lookup func(string) (string, bool)
	log    *slog.Logger

	cur atomic.Pointer[route.Rules]
	// now tells the time of a load and of a refusal.
	now func() time.Time
	// inForce is when the rules in force were loaded and their file's
	// digest; refused is the latest refusal, nil while the file in force
	// is the file on disk.
	inForce atomic.Pointer[loaded]
	refused atomic.Pointer[refusal]

	mu     sync.Mutex // serialises Reload
	sum    [sha256.Size]byte
	accept func(*route.Rules) error
	result func(error)
}

// loaded is when a rules file was loaded, and its SHA-256.
type loaded struct {
	at  time.Time
	sum [sha256.Size]byte
}

// refusal is when and why a reload was refused.
type refusal struct {
	at  time.Time
	msg string
}

// LoadRules loads the rules file at path; lookup resolves the environment
// variables the file names (secret_env, webhook_url_env).
func LoadRules(path string, lookup func(string) (string, bool), log *slog.Logger) (*Rules, error) {
	return loadRulesAt(path, lookup, log, time.Now)
}

// loadRulesAt is LoadRules with the clock that tells when the rules were
// loaded.
func loadRulesAt(path string, lookup func(string) (string, bool), log *slog.Logger, now func() time.Time) (*Rules, error) {
	data, err := route.ReadFile(path)
	if err != nil {
		return nil, err
	}
	rules, err := route.Parse(path, data, lookup)
	if err != nil {
		return nil, err
	}
	r := &Rules{path: path, lookup: lookup, log: log, sum: sha256.Sum256(data), now: now}
	r.cur.Store(rules)
	r.inForce.Store(&loaded{at: now(), sum: r.sum})
	return r, nil
}

// Path returns the rules file's path.
func (r *Rules) Path() string { return r.path }

// Loaded returns when the rules in force were loaded, and the SHA-256 of
// the file they were loaded from, in hex.
func (r *Rules) Loaded() (time.Time, string) {
	l := r.inForce.Load()
	return l.at, hex.EncodeToString(l.sum[:])
}

// LastRefusal returns when and why the latest reload was refused; zero and
// "" when the file in force is the file on disk.
func (r *Rules) LastRefusal() (time.Time, string) {
	if f := r.refused.Load(); f != nil {
		return f.at, f.msg
	}
	return time.Time{}, ""
}

// Current returns the rules in force.
func (r *Rules) Current() *route.Rules { return r.cur.Load() }

// Route names the sinks of an event under the rules in force; it is the
// store.Router of the running service.
func (r *Rules) Route(ev *event.Event) []string { return r.cur.Load().SinksFor(ev) }

// OnReload registers accept, called with the rules of each changed file
// before they take effect: an error refuses them, as a file that does not
// parse is refused, and the rules in force stay. result, when set, learns the
// outcome of every reload of a changed file: nil when the new rules took
// effect. Call it before Watch.
func (r *Rules) OnReload(accept func(*route.Rules) error, result func(error)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.accept, r.result = accept, result
}

// LastError returns why the latest reload was refused, or "" when the file
// in force is the file on disk.
func (r *Rules) LastError() string {
	_, msg := r.LastRefusal()
	return msg
}

// Reload reads the file again and swaps the rules when its contents changed
// and load cleanly. It reports whether the rules changed; on error the rules
// in force are kept.
func (r *Rules) Reload() (bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	data, err := route.ReadFile(r.path)
	if err != nil {
		return r.refuse(err)
	}
	sum := sha256.Sum256(data)
	if sum == r.sum {
		// Unchanged: either in force, or already refused and reported once.
		return false, nil
	}
	r.sum = sum
	rules, err := route.Parse(r.path, data, r.lookup)
	if err == nil && r.accept != nil {
		err = r.accept(rules)
	}
	if err != nil {
		return r.refuse(err)
	}
	r.cur.Store(rules)
	r.inForce.Store(&loaded{at: r.now(), sum: sum})
	r.refused.Store(nil)
	r.log.Info("rules reloaded", "path", r.path, "sinks", len(rules.Sinks), "routes", len(rules.Routes))
	if r.result != nil {
		r.result(nil)
	}
	return true, nil
}

func (r *Rules) refuse(err error) (bool, error) {
	msg := err.Error()
	r.refused.Store(&refusal{at: r.now(), msg: msg})
	r.log.Error("rules reload refused; keeping the rules in force", "path", r.path, "err", msg)
	if r.result != nil {
		r.result(err)
	}
	return false, err
}

// Watch reloads on every value from hup (SIGHUP) and whenever the file's
// contents change, checked every interval: a ConfigMap update replaces the
// file through a symlink swap, which polling sees without inotify. It
// returns when ctx is done.
func (r *Rules) Watch(ctx context.Context, hup <-chan os.Signal, interval time.Duration, clk clock.Clock) {
	t := clk.NewTimer(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			r.log.Info("SIGHUP: reloading rules", "path", r.path)
			_, _ = r.Reload()
		case <-t.C():
			_, _ = r.Reload()
			t.Reset(interval)
		}
	}
}
