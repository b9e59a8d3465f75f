package robot

import (
	"context"
	"fmt"

	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/notify/sinktype"
)

// A robot can neither edit a message nor reply in a thread, so a storm
// digest is messages that stand on their own: the first holds the counts,
// the most urgent alarms and, where the vendor folds a list away (a
// collapsible panel, a button), as many alarms as its size limit takes;
// each later message, posted when alarms join the digest or end, holds the
// digest's counts as they stand and the alarms that joined or ended. The
// robot's pace holds for digests too: each message waits its turn, and one
// whose turn comes after the attempt's deadline ends the attempt, to be
// retried where the list left off.

// CanDigest reports that a chat robot's sink can show storm digests.
func (c *Chat) CanDigest() bool { return true }

// PostDigest posts the digest's first message; its memory says how many
// alarms the message lists, so that ListDigest posts only the others.
func (c *Chat) PostDigest(ctx context.Context, dg *notify.Digest) (map[string]string, notify.Result, error) {
	what := fmt.Sprintf("%s: post of digest %s", c.prefix, dg.ID)
	body, listed, err := c.digests.Digest(dg)
	if err != nil {
		return nil, notify.Result{}, fmt.Errorf("%s: %w", what, err)
	}
	if res, err := c.post(ctx, &Attempt{What: what, sink: &c.Sink}, body); err != nil {
		return nil, res, err
	}
	return sinktype.DigestShown(listed, nil), notify.Result{}, nil
}

// UpdateDigest posts nothing: a robot cannot edit the digest's message, and
// the counts as they stand head each message ListDigest posts for the
// alarms that joined or ended, so that a retry never posts the same counts
// twice and the robot's pace goes to the alarms.
func (c *Chat) UpdateDigest(context.Context, *notify.Digest, map[string]string) (notify.Result, error) {
	return notify.Result{}, nil
}

// ListDigest posts a message with the digest's counts as they stand and
// those of items its first message does not already list; nothing when it
// lists them all.
func (c *Chat) ListDigest(ctx context.Context, dg *notify.Digest, memory map[string]string, items []notify.DigestItem) (notify.Result, error) {
	items = sinktype.DigestUnshown(dg, memory, items)
	if len(items) == 0 {
		return notify.Result{}, nil
	}
	what := fmt.Sprintf("%s: post of digest %s list", c.prefix, dg.ID)
	body, err := c.digests.List(dg, items)
	if err != nil {
		return notify.Result{}, fmt.Errorf("%s: %w", what, err)
	}
	return c.post(ctx, &Attempt{What: what, sink: &c.Sink}, body)
}
