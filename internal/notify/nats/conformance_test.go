package nats_test

import (
	"context"
	"sync"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/natstest"
	"github.com/relay-energy/relay/internal/notify/nats"
	"github.com/relay-energy/relay/internal/notify/sinktest"
	"github.com/relay-energy/relay/internal/notify/sinktype"
)

func TestConformance(t *testing.T) {
	sinktest.Run(t, sinktest.Harness{
		Type: nats.Type,
		Start: func(t *testing.T, _ *clock.Fake) sinktest.Vendor {
			srv := natstest.StartServer(t, natstest.Config{})
			nc, err := natsgo.Connect(srv.URL())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(nc.Close)
			var mu sync.Mutex
			var got []string
			_, err = nc.Subscribe("energy.>", func(m *natsgo.Msg) {
				mu.Lock()
				defer mu.Unlock()
				got = append(got, m.Subject+" "+string(m.Data))
			})
			if err != nil {
				t.Fatal(err)
			}
			if err := nc.Flush(); err != nil {
				t.Fatal(err)
			}
			return sinktest.Vendor{
				Options: func(string) (string, map[string]string) {
					return "subject: energy.alarms.{{.StationID}}.{{.Transition}}\njetstream: true\ncreate_stream: ALARMS\n", nil
				},
				Received: func() []string {
					// Core delivery to the subscriber is asynchronous: the
					// sink is done once JetStream has acked. Wait until no
					// message has arrived for 50 ms.
					_ = nc.Flush()
					last, quiet := -1, 0
					for quiet < 50 {
						mu.Lock()
						n := len(got)
						mu.Unlock()
						if n == last {
							quiet++
						} else {
							last, quiet = n, 0
						}
						time.Sleep(time.Millisecond)
					}
					mu.Lock()
					defer mu.Unlock()
					return append([]string(nil), got...)
				},
				Deps: func(d *sinktype.Deps, _ string) {
					d.NATS = func(context.Context) (*natsgo.Conn, error) { return nc, nil }
				},
			}
		},
	})
}
