package feishu

import (
	"time"

	"github.com/relay-energy/relay/internal/notify"
)

// SetBackoff shortens the first wait before the long connection of app
// sink s reconnects, for tests.
func SetBackoff(s notify.Sink, d time.Duration) { s.(*AppSink).minBackoff = d }

// Redacted returns the values app sink s keeps out of its errors and logs.
func Redacted(s notify.Sink) []string { return s.(*AppSink).secrets.Values() }
