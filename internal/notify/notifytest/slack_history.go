package notifytest

import (
	"strconv"
	"strings"
)

// Posted puts msgs in the fake's channels as messages posted before it
// started, as a channel holds what an earlier run of relay posted there:
// chat.update finds them, and every message posted afterwards gets a later
// ts, as Slack's ts are. They are not calls. A ts of the fake's own form
// (1700000000.NNNNNN) moves its count past it.
func (s *Slack) Posted(msgs ...SlackMessage) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range msgs {
		s.messages[m.Channel+"/"+m.TS] = &m
		if secs, frac, ok := strings.Cut(m.TS, "."); ok && secs == "1700000000" {
			if n, err := strconv.Atoi(frac); err == nil && n > s.seq {
				s.seq = n
			}
		}
	}
}
