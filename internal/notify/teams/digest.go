package teams

import (
	"errors"
	"fmt"

	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/notify/sinktype"
)

// A workflow's webhook can neither edit a card nor reply to one, so a storm
// digest is cards that stand on their own: the first holds the counts, the
// most urgent alarms and, behind an Action.ShowCard button ("Show the 60
// alarms"), every alarm it can hold within MaxBody; each later card, posted
// when alarms join the digest or end, holds the digest's counts as they
// stand and, behind the same kind of button, the alarms that joined or
// ended. Action.ShowCard unfolds in place in Teams and needs no element
// ids, unlike Action.ToggleVisibility.

// Digest is the digest's card: its headline coloured by its most urgent
// ongoing level, the counts per level and per station, the most urgent
// alarms still ongoing, and as many of its alarms as fit behind a button.
func (cards) Digest(dg *notify.Digest) ([]byte, int, error) {
	var body []byte
	n := sinktype.DigestFit(len(dg.Items), func(k int) bool {
		b, err := encode(digestCard(dg, k))
		if err != nil || len(b) > MaxBody {
			return false
		}
		body = b
		return true
	})
	if body == nil {
		b, err := encode(digestCard(dg, n))
		if err != nil {
			return nil, 0, fmt.Errorf("the card does not encode: %w", err)
		}
		body = b
	}
	return body, n, nil
}

// List is a card with the digest's counts as they stand and, behind a
// button, items.
func (cards) List(dg *notify.Digest, items []notify.DigestItem) ([]byte, error) {
	var body []byte
	sinktype.DigestLines(items, Escape, func(lines []string) bool {
		b, err := encode(listCard(dg, items, lines))
		body = b
		return err == nil && len(b) <= MaxBody
	})
	if body == nil {
		return nil, errors.New("the card does not encode")
	}
	return body, nil
}

// digestCard is the digest's first card, listing its first n alarms.
func digestCard(dg *notify.Digest, n int) message {
	sum := sinktype.Summarize(dg, Escape)
	body := []element{
		{Type: "TextBlock", Text: sinktype.DigestIcon(dg) + " " + sinktype.DigestTitle(dg), Size: "Large", Weight: "Bolder", Color: digestColor(dg), Wrap: true},
		{Type: "TextBlock", Text: sum.Levels, Wrap: true},
	}
	for _, line := range sum.Stations {
		body = append(body, element{Type: "TextBlock", Text: line, Wrap: true, Spacing: "None"})
	}
	if len(sum.Urgent) > 0 {
		body = append(body, element{Type: "TextBlock", Text: "Most urgent, still ongoing:", Weight: "Bolder", Wrap: true})
		for _, line := range sinktype.DigestMarked(sum.UrgentItems, sum.Urgent) {
			body = append(body, element{Type: "TextBlock", Text: line, Wrap: true, Spacing: "None"})
		}
	}
	body = append(body, element{Type: "TextBlock", Text: sinktype.DigestFolded(dg, n, "under the button below"), Wrap: true, IsSubtle: true})
	c := card{Schema: "http://adaptivecards.io/schemas/adaptive-card.json", Type: "AdaptiveCard", Version: "1.4",
		MSTeams: &msteams{Width: "Full"}, Body: body}
	if n > 0 {
		items := dg.Items[:n]
		lines := make([]string, n)
		for i := range items {
			lines[i] = sinktype.DigestLine(&items[i], Escape)
		}
		c.Actions = []action{showList(fmt.Sprintf("Show the %d alarms", n), items, lines)}
	}
	return envelope(c)
}

// listCard is a later card of the digest: its counts as they stand, and
// items, worded as lines, behind a button.
func listCard(dg *notify.Digest, items []notify.DigestItem, lines []string) message {
	c := card{Schema: "http://adaptivecards.io/schemas/adaptive-card.json", Type: "AdaptiveCard", Version: "1.4",
		MSTeams: &msteams{Width: "Full"},
		Body: []element{
			{Type: "TextBlock", Text: sinktype.DigestIcon(dg) + " " + sinktype.DigestTitle(dg), Size: "Medium", Weight: "Bolder", Color: digestColor(dg), Wrap: true},
			{Type: "TextBlock", Text: sinktype.DigestLevels(dg), Wrap: true},
			{Type: "TextBlock", Text: sinktype.DigestListHead(dg, items) + ", listed under the button below.", Wrap: true, IsSubtle: true},
		},
		Actions: []action{showList(fmt.Sprintf("Show the %d alarms", len(items)), items, lines)},
	}
	return envelope(c)
}

// showList is a button that unfolds lines, one TextBlock each, marked by
// each item's level or outcome.
func showList(title string, items []notify.DigestItem, lines []string) action {
	var body []element
	for _, line := range sinktype.DigestMarked(items, lines) {
		body = append(body, element{Type: "TextBlock", Text: line, Wrap: true, Spacing: "None"})
	}
	return action{Type: "Action.ShowCard", Title: title, Card: &card{Type: "AdaptiveCard", Body: body}}
}

func envelope(c card) message {
	return message{Type: "message", Attachments: []attachment{{ContentType: "application/vnd.microsoft.card.adaptive", Content: c}}}
}

// digestColor is the colour of the digest's headline: that of its most
// urgent alarm still ongoing, Good when none is.
func digestColor(dg *notify.Digest) string {
	urgent := dg.Urgent(1)
	if len(urgent) == 0 {
		return "Good"
	}
	return Color(urgent[0].Event())
}
