package teams_test

import (
	"testing"

	"github.com/relay-energy/relay/internal/notify/sinktest"
	"github.com/relay-energy/relay/internal/notify/teams"
)

func TestConformance(t *testing.T) {
	sinktest.Run(t, sinktest.Harness{Type: teams.Type, Start: kit.Vendor("")})
}
