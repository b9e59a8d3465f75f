package feishu_test

import (
	"testing"

	"github.com/relay-energy/relay/internal/notify/feishu"
	"github.com/relay-energy/relay/internal/notify/notifytest"
)

// TestADigestCardListsWhatFitsAndLaterCardsTheRest: a digest of 100 alarms
// with long names is one signed card under the 20 KB cap listing as many as
// fit in its panel; listing the digest as alarm management does (25 at a
// time) posts the others in later cards, so that each alarm is in exactly
// one panel.
func TestADigestCardListsWhatFitsAndLaterCardsTheRest(t *testing.T) {
	kit.Folds(t, feishu.MaxBody, func(m notifytest.FeishuMessage) int { return m.Size }, notifytest.FeishuMessage.Panels)
}
