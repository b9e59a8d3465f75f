package store

import "sync"

// changeSignal is the store's generation of committed writes and a channel
// closed at the next one: any number of readers wait for a change without
// being registered, and a burst of writes costs each of them one wake-up.
// Its zero value is ready.
type changeSignal struct {
	mu  sync.Mutex
	gen uint64
	ch  chan struct{}
}

// bump counts a committed write and wakes every waiter.
func (c *changeSignal) bump() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	if c.ch != nil {
		close(c.ch)
		c.ch = nil
	}
}

// next returns the generation and a channel closed at the next write.
func (c *changeSignal) next() (uint64, <-chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ch == nil {
		c.ch = make(chan struct{})
	}
	return c.gen, c.ch
}

// Changes returns the store's generation, which every committed write
// raises by one (a poll that changed alarms, an acknowledgement, a delivery,
// a dead letter...), and a channel closed at the next such write. A reader
// that shows the store's state (the operator console's live update) waits
// on the channel, then calls Changes again: writes that commit meanwhile
// wake it once, however many they are. A write that changes nothing (a poll
// that only repeats what the store knows) commits nothing and wakes nobody.
func (s *Store) Changes() (uint64, <-chan struct{}) { return s.changes.next() }
