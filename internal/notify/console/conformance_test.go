package console_test

import (
	"bytes"
	"strings"
	"sync"
	"testing"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/notify/console"
	"github.com/relay-energy/relay/internal/notify/sinktest"
	"github.com/relay-energy/relay/internal/notify/sinktype"
)

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) lines() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Split(strings.TrimSuffix(s.b.String(), "\n"), "\n")
}

func TestConformance(t *testing.T) {
	sinktest.Run(t, sinktest.Harness{
		Type: console.Type,
		Start: func(t *testing.T, _ *clock.Fake) sinktest.Vendor {
			out := &syncBuffer{}
			return sinktest.Vendor{
				Options:  func(string) (string, map[string]string) { return "", nil },
				Received: out.lines,
				Deps:     func(d *sinktype.Deps, _ string) { d.Console = out },
			}
		},
	})
}
