package console

import "time"

// SetHeartbeat shortens the live-update stream's heartbeat for a test and
// returns what puts it back.
func SetHeartbeat(d time.Duration) (restore func()) {
	old := heartbeat
	heartbeat = d
	return func() { heartbeat = old }
}
