package feishu_test

import (
	"testing"

	"github.com/relay-energy/relay/internal/notify/feishu"
	"github.com/relay-energy/relay/internal/notify/sinktest"
)

func TestConformance(t *testing.T) {
	sinktest.Run(t, sinktest.Harness{Type: feishu.Type, Start: kit.Vendor("")})
}
