package wecom_test

import (
	"testing"

	"github.com/relay-energy/relay/internal/notify/sinktest"
	"github.com/relay-energy/relay/internal/notify/wecom"
)

func TestConformance(t *testing.T) {
	sinktest.Run(t, sinktest.Harness{Type: wecom.Type, Start: kit.Vendor("mention_user_ids: [zhangsan]\n")})
}
