package notifytest

import (
	"errors"
	"sync/atomic"
)

// ErrLeaseGone is what a SwitchFence refuses with, as a replica's lease check
// does once its lease is past its validity.
var ErrLeaseGone = errors.New("lease lost: no renewal succeeded within 2s")

// SwitchFence is a fence (its Check is a notify.Fence) that refuses from the
// moment Closed is set on.
type SwitchFence struct{ Closed atomic.Bool }

// Check returns ErrLeaseGone once the fence is closed, nil before.
func (f *SwitchFence) Check() error {
	if f.Closed.Load() {
		return ErrLeaseGone
	}
	return nil
}
