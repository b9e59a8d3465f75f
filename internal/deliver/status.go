package deliver

import (
	"sync"
	"time"
)

// SinkStatus is what the delivery loop last saw of one sink: when an entry
// last went out, and when an attempt last failed and why. The reason is
// cleaned of Options.Secrets, as dead-letter reasons are.
type SinkStatus struct {
	// LastDelivered is when the sink last took an entry; zero before.
	LastDelivered time.Time
	// LastFailed is when an attempt last failed or an entry was last
	// dead-lettered; zero before. LastError says why.
	LastFailed time.Time
	LastError  string
}

// Statuses keep the SinkStatus of every sink by name, for the operator
// console. One Statuses outlives the Deliverers of successive rules, so that
// a reload that rebuilds a sink keeps what was seen of it. Its methods are
// safe for concurrent use; a nil *Statuses records nothing.
type Statuses struct {
	mu sync.Mutex
	m  map[string]SinkStatus
}

// NewStatuses returns an empty set of sink statuses.
func NewStatuses() *Statuses { return &Statuses{m: map[string]SinkStatus{}} }

// Get returns the status of sink, the zero SinkStatus when nothing was seen
// of it.
func (s *Statuses) Get(sink string) SinkStatus {
	if s == nil {
		return SinkStatus{}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m[sink]
}

func (s *Statuses) delivered(sink string, at time.Time) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.m[sink]
	st.LastDelivered = at
	s.m[sink] = st
}

func (s *Statuses) failed(sink string, at time.Time, reason string) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.m[sink]
	st.LastFailed, st.LastError = at, reason
	s.m[sink] = st
}
