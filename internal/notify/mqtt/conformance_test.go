package mqtt_test

import (
	"context"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/notify/mqtt"
	"github.com/relay-energy/relay/internal/notify/mqtt/mqtttest"
	"github.com/relay-energy/relay/internal/notify/sinktest"
)

func TestConformance(t *testing.T) {
	sinktest.Run(t, sinktest.Harness{
		Type: mqtt.Type,
		Start: func(t *testing.T, _ *clock.Fake) sinktest.Vendor {
			b := mqtttest.Start(t)
			ctx, cancel := context.WithCancel(context.Background())
			t.Cleanup(cancel)
			sub := b.Subscribe(ctx, "conformance-"+time.Now().Format("150405.000000000"), "energy/#")
			time.Sleep(300 * time.Millisecond) // subscribed
			return sinktest.Vendor{
				Secrets: []string{b.Pass},
				Options: func(string) (string, map[string]string) {
					return "url: " + b.URL() + "\nusername_env: MQTT_USER\npassword_env: MQTT_PASSWORD\nretain_state: true\ntimeout: 2s\n",
						map[string]string{"MQTT_USER": b.User, "MQTT_PASSWORD": b.Pass}
				},
				RenderOptions: func() (string, map[string]string) {
					return "url: mqtts://broker.example.com\nusername_env: MQTT_USER\npassword_env: MQTT_PASSWORD\nretain_state: true\n",
						map[string]string{"MQTT_USER": "relay", "MQTT_PASSWORD": "render-password-0123456789"}
				},
				// The sink is done once the broker acknowledged; the
				// subscriber reads a moment later. Wait until nothing has
				// arrived for 200 ms.
				Received: func() []string {
					last, quiet := -1, 0
					for quiet < 20 {
						n := len(sub.Got())
						if n == last {
							quiet++
						} else {
							last, quiet = n, 0
						}
						time.Sleep(10 * time.Millisecond)
					}
					var out []string
					for _, l := range sub.Got() {
						// The retained state is the start again: the
						// suite counts messages of the event topics.
						if len(l) > len("energy/alarms/") && l[:len("energy/alarms/")] == "energy/alarms/" {
							out = append(out, l)
						}
					}
					return out
				},
			}
		},
	})
}
