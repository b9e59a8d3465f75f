package dingtalk_test

import (
	"testing"

	"github.com/relay-energy/relay/internal/notify/dingtalk"
	"github.com/relay-energy/relay/internal/notify/sinktest"
)

func TestConformance(t *testing.T) {
	sinktest.Run(t, sinktest.Harness{Type: dingtalk.Type, Start: kit.Vendor("")})
}
