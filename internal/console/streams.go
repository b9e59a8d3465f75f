package console

import (
	"strconv"
	"sync"
)

// The bounds on live-update streams (the Now page's server-sent events):
// each holds a connection for as long as the page is open, so a session
// may hold MaxStreamsPerSession (a few tabs) and the process MaxStreams,
// over every tenant's console. A stream past either is answered 429.
const (
	MaxStreamsPerSession = 4
	MaxStreams           = 64
)

// streamRetryAfter is the Retry-After, in seconds, of a stream refused for
// being one too many.
const streamRetryAfter = "30"

// stream is one open live-update stream; ended is closed when its session
// ends (a logout, or a session found expired).
type stream struct {
	ended chan struct{}
}

// streams are the open live-update streams of every session. The zero
// value is ready to use.
type streams struct {
	mu        sync.Mutex
	bySession map[string]map[*stream]struct{}
	total     int
}

// open registers a stream of session id, or returns nil and why not when
// the session or the process holds its most streams already.
func (r *streams) open(id string) (*stream, string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.bySession[id]) >= MaxStreamsPerSession {
		return nil, "too many live-update streams: this session has " + strconv.Itoa(MaxStreamsPerSession) +
			" open, the most a session may; close another tab of the console, or reload this page later"
	}
	if r.total >= MaxStreams {
		return nil, "too many live-update streams: the relay has " + strconv.Itoa(MaxStreams) +
			" open, the most it serves; reload this page later (it works without live updates)"
	}
	if r.bySession == nil {
		r.bySession = map[string]map[*stream]struct{}{}
	}
	if r.bySession[id] == nil {
		r.bySession[id] = map[*stream]struct{}{}
	}
	st := &stream{ended: make(chan struct{})}
	r.bySession[id][st] = struct{}{}
	r.total++
	return st, ""
}

// release forgets stream st of session id once it is over.
func (r *streams) release(id string, st *stream) {
	r.mu.Lock()
	defer r.mu.Unlock()
	set, ok := r.bySession[id]
	if !ok {
		return
	}
	if _, ok := set[st]; !ok {
		return
	}
	delete(set, st)
	r.total--
	if len(set) == 0 {
		delete(r.bySession, id)
	}
}

// end tells the open streams of session id that it ended; they stop at
// once and release themselves.
func (r *streams) end(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for st := range r.bySession[id] {
		select {
		case <-st.ended:
		default:
			close(st.ended)
		}
	}
}

// count returns how many streams session id holds, and the process in all.
func (r *streams) count(id string) (int, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.bySession[id]), r.total
}
