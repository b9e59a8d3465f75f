package slack

import (
	"context"
	"fmt"
	"strings"

	slackapi "github.com/slack-go/slack"

	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/notify/sinktype"
)

// CanDigest reports whether the sink can show storm digests: with the bot
// token (a message to edit, a thread for the list), not with an incoming
// webhook.
func (s *Sink) CanDigest() bool { return s.api != nil }

// PostDigest posts the digest's message: the headline, the counts per
// level and station, and the most urgent alarms; the full list follows in
// its thread.
func (s *Sink) PostDigest(ctx context.Context, dg *notify.Digest) (map[string]string, notify.Result, error) {
	if err := s.pace(ctx); err != nil {
		return nil, notify.WaitResult(err), err
	}
	rctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	text, atts := s.digestMessage(dg)
	channel, ts, err := s.api.PostMessageContext(rctx, s.cfg.Channel, slackapi.MsgOptionText(text, false), slackapi.MsgOptionAttachments(atts...))
	if err != nil {
		res, err := s.digestFail("chat.postMessage (digest)", dg, err)
		return nil, res, err
	}
	if channel == "" {
		channel = s.cfg.Channel
	}
	return map[string]string{MemoryTS: ts, MemoryChannel: channel}, notify.Result{}, nil
}

// UpdateDigest edits the digest's message to show its counts as they stand.
func (s *Sink) UpdateDigest(ctx context.Context, dg *notify.Digest, memory map[string]string) (notify.Result, error) {
	ts, channel := memory[MemoryTS], memory[MemoryChannel]
	if ts == "" || channel == "" {
		return notify.Result{}, fmt.Errorf("slack sink %q: digest %s has no message to update", s.cfg.Name, dg.ID)
	}
	rctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	text, atts := s.digestMessage(dg)
	_, _, _, err := s.api.UpdateMessageContext(rctx, channel, ts, slackapi.MsgOptionText(text, false), slackapi.MsgOptionAttachments(atts...))
	if err != nil {
		if messageGone(err) {
			s.log.Warn("could not update the digest message", "sink", s.cfg.Name, "digest", dg.ID, "error", s.clean(err))
			return notify.Result{}, nil
		}
		return s.digestFail("chat.update (digest)", dg, err)
	}
	return notify.Result{}, nil
}

// ListDigest replies in the digest's thread with items, one line each.
func (s *Sink) ListDigest(ctx context.Context, dg *notify.Digest, memory map[string]string, items []notify.DigestItem) (notify.Result, error) {
	ts, channel := memory[MemoryTS], memory[MemoryChannel]
	if ts == "" || channel == "" {
		return notify.Result{}, fmt.Errorf("slack sink %q: digest %s has no message to reply to", s.cfg.Name, dg.ID)
	}
	if err := s.pace(ctx); err != nil {
		return notify.WaitResult(err), err
	}
	lines := make([]string, len(items))
	for i := range items {
		lines[i] = levelEmoji(items[i].Level) + " " + sinktype.DigestLine(&items[i], slackEscape)
	}
	rctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	_, _, err := s.api.PostMessageContext(rctx, channel, slackapi.MsgOptionText(strings.Join(lines, "\n"), false), slackapi.MsgOptionTS(ts))
	if err != nil {
		return s.digestFail("chat.postMessage (digest list)", dg, err)
	}
	return notify.Result{}, nil
}

func (s *Sink) digestFail(method string, dg *notify.Digest, err error) (notify.Result, error) {
	return slackResult(err), fmt.Errorf("slack sink %q: %s of digest %s: %s", s.cfg.Name, method, dg.ID, s.clean(err))
}

// digestMessage is the digest's text and attachments: the counts, and
// with the app token, while alarms of it are ongoing, its "Acknowledge
// all" button.
func (s *Sink) digestMessage(dg *notify.Digest) (string, []slackapi.Attachment) {
	text, att := digestMessage(dg)
	if more, ok := s.digestButton(dg, att.Color); ok {
		return text, []slackapi.Attachment{att, more}
	}
	return text, []slackapi.Attachment{att}
}

// digestMessage is the digest's text and attachment.
func digestMessage(dg *notify.Digest) (string, slackapi.Attachment) {
	title := sinktype.DigestTitle(dg)
	var b strings.Builder
	b.WriteString(sinktype.DigestLevels(dg))
	b.WriteString("\n")
	for _, line := range sinktype.DigestStations(dg, 10, slackEscape) {
		b.WriteString("• " + line + "\n")
	}
	if urgent := dg.Urgent(5); len(urgent) > 0 {
		b.WriteString("Most urgent, still ongoing:\n")
		for i := range urgent {
			b.WriteString(levelEmoji(urgent[i].Level) + " " + sinktype.DigestLine(&urgent[i], slackEscape) + "\n")
		}
	}
	b.WriteString(strings.TrimSpace("Every alarm is listed in this thread. " + sinktype.DigestResume(dg)))
	color := colorResolved
	if dg.Ongoing() > 0 {
		started, _ := dg.Levels()
		for l := 0; l <= 3; l++ {
			if started[l] > 0 {
				color = levelColor(l)
				break
			}
		}
	}
	att := slackapi.Attachment{Color: color, Title: title, Text: b.String(), Fallback: title}
	return ":rotating_light: " + title, att
}

// Remind replies in the start's thread that the alarm is still ongoing. An
// alarm whose start has no message (posted through an incoming webhook, or
// never) gets no reminder.
func (s *Sink) Remind(ctx context.Context, ev *event.Event, memory map[string]string) (notify.Result, error) {
	ts, channel := memory[MemoryTS], memory[MemoryChannel]
	if s.api == nil || ts == "" || channel == "" {
		return notify.Result{}, nil
	}
	if err := s.pace(ctx); err != nil {
		return notify.WaitResult(err), err
	}
	rctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	text := fmt.Sprintf(":alarm_clock: %s: %s at %s is still ongoing.", slackEscape(ev.Data.Note),
		slackEscape(sinktype.What(&event.Event{Data: event.Data{EventCode: ev.Data.EventCode, EventDesc: ev.Data.EventDesc}})),
		slackEscape(sinktype.Where(ev)))
	_, _, err := s.api.PostMessageContext(rctx, channel, slackapi.MsgOptionText(text, false), slackapi.MsgOptionTS(ts))
	if err != nil {
		return s.fail("chat.postMessage (reminder)", ev, err)
	}
	return notify.Result{}, nil
}
