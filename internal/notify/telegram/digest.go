package telegram

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/notify/sinktype"
)

// CanDigest reports that a telegram sink can show storm digests: a message
// it edits as alarms end, and replies to it that list the alarms.
func (s *Sink) CanDigest() bool { return true }

// PostDigest sends the digest's message (sendMessage, HTML): its headline,
// the counts per level and per station, and the most urgent alarms still
// ongoing. Its message_id and chat are the digest's memory; the list
// follows in replies to it. With buttons, it carries Acknowledge all while
// some of its alarms are ongoing.
func (s *Sink) PostDigest(ctx context.Context, dg *notify.Digest) (map[string]string, notify.Result, error) {
	body, err := sinktype.JSON(sendBody{ChatID: chatID(s.cfg.Chat.ID), MessageThreadID: s.cfg.Chat.ThreadID, Text: digestText(dg),
		ParseMode: "HTML", LinkPreviewOptions: linkPreview{IsDisabled: true}, Silent: s.cfg.Chat.Silent, ReplyMarkup: s.digestKeyboard(dg)})
	if err != nil {
		return nil, notify.Result{}, fmt.Errorf("telegram sink %q: digest %s: %w", s.cfg.Name, dg.ID, err)
	}
	msg, res, _, err := s.call(ctx, Request{Method: methodSend, ChatID: s.cfg.Chat.ID, Body: body}, "digest "+dg.ID)
	if err != nil {
		return nil, res, err
	}
	chat := strconv.FormatInt(msg.Chat.ID, 10)
	if msg.Chat.ID == 0 {
		chat = s.cfg.Chat.ID
	}
	return map[string]string{MemoryMessageID: strconv.Itoa(msg.MessageID), MemoryChatID: chat}, notify.Result{}, nil
}

// UpdateDigest edits the digest's message to show its counts as they
// stand. A message Telegram no longer lets the bot edit (deleted, or the
// same text: a repeat after a lost answer) is logged and not retried. With
// buttons, the edit keeps Acknowledge all while some of its alarms are
// ongoing and removes it after.
func (s *Sink) UpdateDigest(ctx context.Context, dg *notify.Digest, memory map[string]string) (notify.Result, error) {
	id, chat, err := s.digestMessage(dg, memory)
	if err != nil {
		return notify.Result{}, err
	}
	body, err := sinktype.JSON(editBody{ChatID: chatID(chat), MessageID: id, Text: digestText(dg), ParseMode: "HTML",
		LinkPreviewOptions: linkPreview{IsDisabled: true}, ReplyMarkup: s.digestKeyboard(dg)})
	if err != nil {
		return notify.Result{}, fmt.Errorf("telegram sink %q: digest %s: %w", s.cfg.Name, dg.ID, err)
	}
	_, res, desc, err := s.call(ctx, Request{Method: methodEdit, ChatID: chat, Body: body}, "digest "+dg.ID)
	if err != nil && messageGone(desc) {
		if !strings.Contains(strings.ToLower(desc), "not modified") {
			s.cfg.Logger.Warn("could not edit the digest message", "sink", s.cfg.Name, "digest", dg.ID, "chat_id", chat,
				"message_id", id, "error", err.Error())
		}
		return notify.Result{}, nil
	}
	return res, err
}

// ListDigest replies to the digest's message with items, one line each,
// cut to fit Telegram's 4096 characters.
func (s *Sink) ListDigest(ctx context.Context, dg *notify.Digest, memory map[string]string, items []notify.DigestItem) (notify.Result, error) {
	id, chat, err := s.digestMessage(dg, memory)
	if err != nil {
		return notify.Result{}, err
	}
	if len(items) == 0 {
		return notify.Result{}, nil
	}
	lines := sinktype.DigestLines(items, Escape, func(lines []string) bool {
		return visible(listText(items, lines)) <= MaxText
	})
	body, err := sinktype.JSON(sendBody{ChatID: chatID(chat), MessageThreadID: s.cfg.Chat.ThreadID, Text: Truncate(listText(items, lines), MaxText),
		ParseMode: "HTML", LinkPreviewOptions: linkPreview{IsDisabled: true}, Silent: true,
		ReplyParameters: &replyParameters{MessageID: id, AllowSendingWithoutReply: true}})
	if err != nil {
		return notify.Result{}, fmt.Errorf("telegram sink %q: digest %s: %w", s.cfg.Name, dg.ID, err)
	}
	_, res, _, err := s.call(ctx, Request{Method: methodSend, ChatID: chat, Body: body}, "digest "+dg.ID+" list")
	return res, err
}

// digestKeyboard is the digest's button, nil without buttons.
func (s *Sink) digestKeyboard(dg *notify.Digest) *inlineKeyboard {
	if !s.cfg.Buttons {
		return nil
	}
	return digestKeyboard(dg)
}

// digestMessage reads the digest's message from its memory.
func (s *Sink) digestMessage(dg *notify.Digest, memory map[string]string) (int, string, error) {
	id, err := strconv.Atoi(memory[MemoryMessageID])
	chat := memory[MemoryChatID]
	if err != nil || id <= 0 || chat == "" {
		return 0, "", fmt.Errorf("telegram sink %q: digest %s has no message to refer to (memory %v)", s.cfg.Name, dg.ID, memory)
	}
	return id, chat, nil
}

// digestText is the digest's message in HTML, within MaxText characters.
func digestText(dg *notify.Digest) string {
	sum := sinktype.Summarize(dg, Escape)
	var b strings.Builder
	b.WriteString(sinktype.DigestIcon(dg) + " <b>" + Escape(sinktype.DigestTitle(dg)) + "</b>\n" + Escape(sum.Levels) + "\n")
	b.WriteString(sinktype.Bulleted(sum.Stations, "• ", "\n"))
	if len(sum.Urgent) > 0 {
		b.WriteString("\n<b>Most urgent, still ongoing:</b>\n" + sinktype.Bulleted(sinktype.DigestMarked(sum.UrgentItems, sum.Urgent), "", "\n"))
	}
	b.WriteString("\n<i>" + Escape(strings.TrimSpace("Every alarm is listed in replies to this message. "+sinktype.DigestResume(dg))) + "</i>")
	return Truncate(b.String(), MaxText)
}

// listText is a list reply: each item's mark (its level, or how it ended)
// and its line.
func listText(items []notify.DigestItem, lines []string) string {
	return strings.Join(sinktype.DigestMarked(items, lines), "\n")
}
