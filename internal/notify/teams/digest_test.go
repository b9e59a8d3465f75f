package teams_test

import (
	"testing"

	"github.com/relay-energy/relay/internal/notify/notifytest"
	"github.com/relay-energy/relay/internal/notify/teams"
)

// TestADigestCardListsWhatFitsAndLaterCardsTheRest: a digest of 100 alarms
// with long names is one card within MaxBody listing as many as fit behind
// its button; listing the digest as alarm management does (25 at a time)
// posts the others in later cards, so that each alarm is behind exactly one
// button.
func TestADigestCardListsWhatFitsAndLaterCardsTheRest(t *testing.T) {
	kit.Folds(t, teams.MaxBody, func(m notifytest.TeamsMessage) int { return m.Size }, notifytest.TeamsMessage.Hidden)
}
