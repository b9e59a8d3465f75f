package console

import (
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// DefaultLiveEvery is the least time between two live updates of a page:
// a storm of a thousand transitions makes a few refreshes, not a thousand.
const DefaultLiveEvery = time.Second

// Heartbeat is how often an idle event stream sends a comment, so that
// proxies and kubectl port-forward keep the connection open.
const Heartbeat = 15 * time.Second

// heartbeat is Heartbeat; tests shorten it.
var heartbeat = Heartbeat

// writeWait bounds each write to an event stream: a browser that stopped
// reading is let go.
const writeWait = 10 * time.Second

// Close ends the console's live-update streams: call it when the tenant
// stops or the ops server shuts down, which waits for open requests. The
// pages keep answering.
func (c *Console) Close() { c.closeOnce.Do(func() { close(c.closed) }) }

// events serves the live update of the Now page: a server-sent event
// stream that says "alarms" whenever the tenant's store committed a change
// (an alarm's transition, an acknowledgement, a delivery), at most once per
// LiveEvery, with the store's generation as the event's id. It needs a
// session and ends with it (at its logout or expiry, checked on each
// heartbeat too), when the browser goes, or at Close. A session holds at
// most MaxStreamsPerSession streams and the process MaxStreams.
//
// The stream lifts the ops listener's read and write timeouts, which bound
// a request: each of its writes has writeWait instead.
func (c *Console) events(w http.ResponseWriter, r *http.Request) {
	id, s, ok := c.session(r)
	if !ok {
		http.Error(w, "not logged in: log in at "+base(r)+"login", http.StatusForbidden)
		return
	}
	if c.o.Store == nil {
		http.Error(w, "live updates need the tenant's store, which this console was not given", http.StatusNotFound)
		return
	}
	st, why := c.o.Sessions.live.open(id)
	if st == nil {
		w.Header().Set("Retry-After", streamRetryAfter)
		http.Error(w, why, http.StatusTooManyRequests)
		return
	}
	defer c.o.Sessions.live.release(id, st)
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Time{})
	expiry := time.NewTimer(s.expires.Sub(c.o.Sessions.now()))
	defer expiry.Stop()
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	send := func(s string) bool {
		_ = rc.SetWriteDeadline(time.Now().Add(writeWait))
		if _, err := fmt.Fprint(w, s); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	gen, changed := c.o.Store.Changes()
	first := "retry: 3000\n\n"
	if last := r.Header.Get("Last-Event-ID"); last != "" && last != strconv.FormatUint(gen, 10) {
		// A reconnection that missed changes: refresh at once.
		first += alarmsEvent(gen)
	}
	if !send(first) {
		return
	}
	// over tells the page its session ended: live.js closes the stream
	// and reloads, which goes to the login form.
	over := func() { send(endedEvent) }
	beat := time.NewTicker(heartbeat)
	defer beat.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-c.closed:
			return
		case <-st.ended:
			over()
			return
		case <-expiry.C:
			over()
			return
		case <-beat.C:
			if _, ok := c.o.Sessions.get(id); !ok {
				over()
				return
			}
			if !send(": heartbeat\n\n") {
				return
			}
		case <-changed:
			if _, ok := c.o.Sessions.get(id); !ok {
				over()
				return
			}
			gen, changed = c.o.Store.Changes()
			if !send(alarmsEvent(gen)) {
				return
			}
			// The changes of the next LiveEvery wait, and go as one event.
			pause := time.NewTimer(c.o.LiveEvery)
			select {
			case <-r.Context().Done():
				pause.Stop()
				return
			case <-c.closed:
				pause.Stop()
				return
			case <-st.ended:
				pause.Stop()
				over()
				return
			case <-pause.C:
			}
		}
	}
}

// endedEvent tells the page that its session ended (a logout, in any tab,
// or its expiry): live.js stops the stream and reloads to the login form.
const endedEvent = "event: ended\ndata: the session ended\n\n"

// alarmsEvent is the event that tells the page the alarms changed, with the
// store's generation gen as its id.
func alarmsEvent(gen uint64) string {
	return "id: " + strconv.FormatUint(gen, 10) + "\nevent: alarms\ndata: changed\n\n"
}
