package notifytest

import (
	"sync"
	"time"
)

// Gate holds the attempts that pass it until n of them are in flight
// together, then lets those n go, and counts the most it held at once: a
// test of a concurrency limit of n passes each attempt through it, so that
// the limit is reached, not merely respected.
type Gate struct {
	n                       int
	mu                      sync.Mutex
	inFlight, most, arrived int
	full                    chan struct{}
}

// NewGate returns a gate that lets attempts go n at a time.
func NewGate(n int) *Gate { return &Gate{n: n, full: make(chan struct{})} }

// Pass holds the caller until n attempts are in flight together, or for at
// most wait: it reports whether they were.
func (g *Gate) Pass(wait time.Duration) bool {
	g.mu.Lock()
	g.inFlight++
	g.most = max(g.most, g.inFlight)
	// Every n arrivals release each other.
	full := g.full
	if g.arrived++; g.arrived%g.n == 0 {
		close(g.full)
		g.full = make(chan struct{})
	}
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		g.inFlight--
		g.mu.Unlock()
	}()
	select {
	case <-full:
		return true
	case <-time.After(wait):
		return false
	}
}

// Most returns the most attempts the gate held at once.
func (g *Gate) Most() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.most
}
