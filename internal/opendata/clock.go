package opendata

import (
	"net/http"
	"slices"
	"time"
)

// clockSamples is how many recent answers the upstream clock estimate is
// the median of: one answer delayed or served from a cache moves nothing.
const clockSamples = 9

// upstreamClock estimates the upstream's clock from the Date header of its
// answers. The header has a resolution of one second, so a sample is the
// header plus half a second, minus the midpoint of the request on the
// client's clock.
type upstreamClock struct {
	samples []time.Duration // ring of the latest samples
	next    int
}

// observe records the Date header of an answer to a request sent at sent
// and answered at got, and returns the upstream's time at the answer (zero
// without a usable header).
func (u *upstreamClock) observe(h http.Header, sent, got time.Time) time.Time {
	date, err := http.ParseTime(h.Get("Date"))
	if err != nil {
		return time.Time{}
	}
	at := date.Add(500 * time.Millisecond)
	mid := sent.Add(got.Sub(sent) / 2)
	d := at.Sub(mid)
	if len(u.samples) < clockSamples {
		u.samples = append(u.samples, d)
	} else {
		u.samples[u.next] = d
	}
	u.next = (u.next + 1) % clockSamples
	return at.Add(got.Sub(mid))
}

// offset returns the median sample: the upstream's clock minus the
// client's. A median within the header's resolution of one second is no
// offset to speak of, and is zero.
func (u *upstreamClock) offset() (time.Duration, bool) {
	if len(u.samples) == 0 {
		return 0, false
	}
	s := slices.Clone(u.samples)
	slices.Sort(s)
	d := s[len(s)/2]
	if d >= -time.Second && d <= time.Second {
		d = 0
	}
	return d, true
}

// ClockOffset returns the upstream's clock minus the client's, the median of
// the Date headers of the latest answers, and false before any answer
// carried one. Alarm times are stamped by the upstream (and its devices):
// the poller takes its windows and decisions in that clock.
func (c *Client) ClockOffset() (time.Duration, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.upClock.offset()
}
