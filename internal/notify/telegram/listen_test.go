package telegram_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/notify/notifytest"
	"github.com/relay-energy/relay/internal/notify/sinktest"
	"github.com/relay-energy/relay/internal/notify/telegram"
	"github.com/relay-energy/relay/internal/redact/redacttest"
)

// recorder is the core's side of the listener for these tests: it records
// each action, checks that Telegram still holds the click's update
// unconfirmed when it arrives (an update is confirmed only once handled),
// and answers with result (by default "Done: <kind>").
type recorder struct {
	api    *notifytest.Telegram
	result func(ctx context.Context, n int, a notify.Action) (notify.ActionResult, error)

	mu        sync.Mutex
	calls     int
	acts      []notify.Action
	confirmed []string
}

func (r *recorder) Act(ctx context.Context, a notify.Action) (notify.ActionResult, error) {
	r.mu.Lock()
	r.calls++
	n := r.calls
	if !r.api.Unconfirmed(a.Ref) {
		r.confirmed = append(r.confirmed, a.Ref)
	}
	r.mu.Unlock()
	res, err := notify.ActionResult{Text: "Done: " + string(a.Kind)}, error(nil)
	if r.result != nil {
		res, err = r.result(ctx, n, a)
	}
	if err == nil {
		r.mu.Lock()
		r.acts = append(r.acts, a)
		r.mu.Unlock()
	}
	return res, err
}

func (r *recorder) actions() []notify.Action {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.acts)
}

// listen runs l.Listen until the returned stop is called, moving clk to
// each deadline the listener waits for (its backoffs), so that waiting
// takes no real time. stop returns what Listen returned.
func listen(t *testing.T, clk *clock.Fake, l notify.Listener, acts notify.Actions) (stop func() error) {
	t.Helper()
	return listenWith(t, clk, func(ctx context.Context) error { return l.Listen(ctx, acts) })
}

// listenWith is listen of run, a Listen or a ListenFor.
func listenWith(t *testing.T, clk *clock.Fake, run func(ctx context.Context) error) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	ticking := make(chan struct{})
	go func() {
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ticking:
				return
			case <-tick.C:
				if next, ok := clk.NextDeadline(); ok {
					clk.Set(next)
				}
			}
		}
	}()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case err = <-done:
			case <-time.After(10 * time.Second):
				t.Errorf("Listen did not return within 10 s of its context's end")
			}
			close(ticking)
		})
		return err
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

// listener builds a sink with buttons of the bot token in the chat, logging
// to logs.
func listener(t *testing.T, clk *clock.Fake, api *notifytest.Telegram, tok string, logs *sinktest.LogBuffer) notify.Listener {
	t.Helper()
	var w io.Writer = io.Discard
	if logs != nil {
		w = logs
	}
	s := build(t, "tg", clk, notify.NewLimits(clk), api.URL(), tok, strconv.Itoa(chatID), "buttons: true\n", w)
	l, ok := s.(notify.Listener)
	if !ok {
		t.Fatal("a telegram sink is no notify.Listener")
	}
	return l
}

// click is a callback query pushed to the fake and what should become of it.
type click struct {
	update int64
	query  string
	from   notifytest.TelegramUser
	data   string
}

func push(api *notifytest.Telegram, n int, message int) []click {
	datas := []string{"a:x1", "u:x1", "s1h:x1", "sc:#AbCdEfGhIjKlMnOpQrStUv", "da:20261121T080000Z-1"}
	var out []click
	for i := range n {
		c := click{from: notifytest.TelegramUser{ID: int64(1000 + i%7), Username: fmt.Sprintf("user%d", i%7)}, data: datas[i%len(datas)]}
		if i%7 == 3 {
			c.from.Username, c.from.FirstName = "", "Ana"
		}
		c.update, c.query = api.PushCallback(c.from, chatID, message, c.data)
		out = append(out, c)
	}
	return out
}

// wantAction is the action a click asks for, as the listener must hand it
// to the core.
func wantAction(c click) notify.Action {
	a := notify.Action{Sink: "tg", Ref: c.query, Actor: notify.Actor{Via: "telegram", ID: strconv.FormatInt(c.from.ID, 10),
		Name: c.from.Username}}
	if a.Actor.Name == "" {
		a.Actor.Name = c.from.FirstName
	}
	kind, ref, _ := strings.Cut(c.data, ":")
	switch kind {
	case "a":
		a.Kind, a.Alarms = notify.Acknowledge, []string{ref}
	case "u":
		a.Kind, a.Alarms = notify.Unacknowledge, []string{ref}
	case "s1h":
		a.Kind, a.Alarms, a.ShelveFor = notify.Shelve, []string{ref}, time.Hour
	case "sc":
		a.Kind, a.Alarms = notify.Shelve, []string{ref}
	case "da":
		a.Kind, a.Digest = notify.Acknowledge, ref
	}
	return a
}

// checkHandledOnce checks that every click reached the core once, as it
// asked, and was answered once with the core's text.
func checkHandledOnce(t *testing.T, api *notifytest.Telegram, rec *recorder, clicks []click) {
	t.Helper()
	acts := rec.actions()
	byRef := map[string]notify.Action{}
	for _, a := range acts {
		if _, dup := byRef[a.Ref]; dup {
			t.Errorf("click %s reached the core twice", a.Ref)
		}
		byRef[a.Ref] = a
	}
	mine := map[string]bool{}
	for _, c := range clicks {
		mine[c.query] = true
	}
	answered := map[string]int{}
	for _, a := range api.Answers() {
		if !mine[a.CallbackQueryID] {
			continue
		}
		answered[a.CallbackQueryID]++
		if want := "Done: " + string(byRef[a.CallbackQueryID].Kind); a.Text != want || a.ShowAlert {
			t.Errorf("click %s answered %q (alert %v), want %q", a.CallbackQueryID, a.Text, a.ShowAlert, want)
		}
	}
	for _, c := range clicks {
		got, ok := byRef[c.query]
		want := wantAction(c)
		if !ok || fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("click %s (%s) reached the core as\n%+v, want\n%+v", c.query, c.data, got, want)
		}
		if answered[c.query] != 1 {
			t.Errorf("click %s answered %d times, want once", c.query, answered[c.query])
		}
	}
	if len(acts) != len(clicks) {
		t.Errorf("%d actions for %d clicks", len(acts), len(clicks))
	}
	if len(rec.confirmed) > 0 {
		t.Errorf("the updates of %d clicks were confirmed to Telegram before they were handled: %v", len(rec.confirmed), rec.confirmed)
	}
}

// TestAStormOfClicksIsHandledOnceEachThroughADroppedPollAndAConflict: 100
// clicks, half before and half after a long poll whose connection drops, a
// poll that drops at once and another poller's 409: each click reaches the
// core once and is answered once (the Bot API: "After the user presses a
// callback button, Telegram clients will display a progress bar until you
// call answerCallbackQuery. It is, therefore, necessary to react by calling
// answerCallbackQuery even if no notification to the user is needed"), no
// update is confirmed before it was handled, the conflict is logged saying
// what to do, and the token is in no log line.
func TestAStormOfClicksIsHandledOnceEachThroughADroppedPollAndAConflict(t *testing.T) {
	clk := clock.NewFake(sinktest.Epoch)
	api := newAPI(t, clk)
	logs := &sinktest.LogBuffer{}
	l := listener(t, clk, api, token, logs)
	res, err := send(t, clk, l, sinktest.Event("x1", 0, event.Start), nil)
	if err != nil {
		t.Fatal(err)
	}
	message, _ := strconv.Atoi(res.Memory["message_id"])
	rec := &recorder{api: api}
	stop := listen(t, clk, l, rec)
	clicks := push(api, 50, message)
	api.Await(t, "50 answers", func() bool { return len(api.Answers()) == 50 })
	api.WaitPolling(t, 1)
	api.FailPolls(notifytest.TelegramPollDropped, notifytest.TelegramPollConflict)
	api.CutPolls()
	clicks = append(clicks, push(api, 50, message)...)
	api.Await(t, "100 answers", func() bool { return len(api.Answers()) == 100 })
	api.WaitPolling(t, 1)
	if err := stop(); err != nil {
		t.Fatalf("Listen: %v", err)
	}
	checkHandledOnce(t, api, rec, clicks)
	if n := api.Queued(); n != 0 {
		t.Errorf("%d updates left unconfirmed after every click was handled", n)
	}
	var polls, failed int
	for _, c := range api.Calls() {
		if c.Method == notifytest.TelegramGetUpdates {
			polls++
			if c.Status != 200 {
				failed++
			}
		}
	}
	// The dropped poll and the conflict fail; the cut fails the poll
	// waiting when it comes, unless on a loaded machine that poll had
	// already returned (the listener between two polls), when it cuts
	// nothing.
	if failed < 2 || failed > 3 {
		t.Errorf("%d of %d polls failed, want the dropped one, the conflict and at most the cut one", failed, polls)
	}
	out := logs.String()
	if !strings.Contains(out, "another program polls this bot's updates") || !strings.Contains(out, "one relay listening per bot") {
		t.Errorf("the log does not say what to do about the conflict:\n%s", out)
	}
	redacttest.AssertNoSecret(t, []string{token}, map[string]string{"log": out})
}

// TestABadDayOfTelegramsLosesNoClickAndAppliesNoneTwice: clicks arrive
// while Telegram has a bad day: a long poll cut before its timeout, a 502
// as the Bot API's JSON and as its front's HTML page, a poll whose answer
// is lost on the way, so that its updates, not confirmed, come again
// (getUpdates: "By default, updates starting with the earliest unconfirmed
// update are returned. An update is considered confirmed as soon as
// getUpdates is called with an offset higher than its update_id"), an
// answer that holds each update twice (Update.update_id "allows you to
// ignore repeated updates"), two answerCallbackQuery that fail with a 502,
// and, as a listener stops in the middle of a batch, a 502 to the
// getUpdates that confirms the clicks it handled. Each click reaches the
// core once and is answered once, as Telegram asks ("Telegram clients will
// display a progress bar until you call answerCallbackQuery"); the next
// listener reads only the clicks not handled; no update is left
// unconfirmed, and no log line holds the token.
func TestABadDayOfTelegramsLosesNoClickAndAppliesNoneTwice(t *testing.T) {
	clk := clock.NewFake(sinktest.Epoch)
	api := newAPI(t, clk)
	logs := &sinktest.LogBuffer{}
	first := &recorder{api: api}
	stop := listen(t, clk, listener(t, clk, api, token, logs), first)
	api.FailAnswers(2)
	clicks := push(api, 20, 5)
	api.Await(t, "20 answers", func() bool { return len(api.Answers()) == 20 })
	api.WaitPolling(t, 1)
	api.FailPolls(notifytest.TelegramPollBadGateway, notifytest.TelegramPollGatewayPage, notifytest.TelegramPollLost,
		notifytest.TelegramPollDuplicated)
	api.CutPolls()
	clicks = append(clicks, push(api, 20, 5)...)
	api.Await(t, "40 answers", func() bool { return len(api.Answers()) == 40 })
	api.WaitPolling(t, 1)
	if err := stop(); err != nil {
		t.Fatalf("Listen: %v", err)
	}
	checkHandledOnce(t, api, first, clicks)

	// Four clicks wait for the next listener, which stops while the core
	// handles the third; the getUpdates that confirms the first two gets
	// a 502.
	var batch []click
	for _, ref := range []string{"b1", "b2", "stop", "b4"} {
		c := click{from: notifytest.TelegramUser{ID: 42, Username: "alice"}, data: "a:" + ref}
		c.update, c.query = api.PushCallback(c.from, chatID, 5, c.data)
		batch = append(batch, c)
	}
	third := make(chan struct{})
	second := &recorder{api: api, result: func(ctx context.Context, _ int, a notify.Action) (notify.ActionResult, error) {
		if a.Alarms[0] == "stop" {
			close(third)
			<-ctx.Done()
			return notify.ActionResult{}, ctx.Err()
		}
		return notify.ActionResult{Text: "Done: " + string(a.Kind)}, nil
	}}
	stop = listen(t, clk, listener(t, clk, api, token, logs), second)
	<-third
	api.FailPolls(notifytest.TelegramPollBadGateway)
	if err := stop(); err != nil {
		t.Fatalf("Listen: %v", err)
	}
	third2 := &recorder{api: api}
	stop = listen(t, clk, listener(t, clk, api, token, logs), third2)
	api.Await(t, "44 answers", func() bool { return len(api.Answers()) == 44 })
	api.WaitPolling(t, 1)
	if err := stop(); err != nil {
		t.Fatalf("Listen: %v", err)
	}
	checkHandledOnce(t, api, second, batch[:2])
	checkHandledOnce(t, api, third2, batch[2:])

	if n := api.Queued(); n != 0 {
		t.Errorf("%d updates left unconfirmed after every click was handled", n)
	}
	if n := countCalls(api, notifytest.TelegramAnswerCallbackQuery, false); n != 2 {
		t.Errorf("%d answerCallbackQuery failed, want the two 502s and no answer given twice", n)
	}
	byStatus := map[int]int{}
	for _, c := range api.Calls() {
		if c.Method == notifytest.TelegramGetUpdates {
			byStatus[c.Status]++
		}
	}
	if byStatus[502] != 3 || byStatus[0] != 2 {
		t.Errorf("polls by status %v, want three 502s and two connections ended (the cut, the lost answer)", byStatus)
	}
	redacttest.AssertNoSecret(t, []string{token}, map[string]string{"log": logs.String()})
}

// TestClicksAfterAQuietWeekAreHandledOnce: after a week without updates
// Telegram chooses the next update's id at random (Update.update_id: "If
// there are no new updates for at least a week, then identifier of the
// next update will be chosen randomly instead of sequentially"), here below
// the listener's offset, which Telegram then takes for none, answering from
// the earliest unconfirmed update. The clicks after the quiet week are
// handled once each and confirmed, and the listener does not poll in a
// loop.
func TestClicksAfterAQuietWeekAreHandledOnce(t *testing.T) {
	clk := clock.NewFake(sinktest.Epoch)
	api := newAPI(t, clk)
	rec := &recorder{api: api}
	stop := listen(t, clk, listener(t, clk, api, token, nil), rec)
	clicks := push(api, 3, 5)
	api.Await(t, "3 answers", func() bool { return len(api.Answers()) == 3 })
	api.WaitPolling(t, 1)
	api.QuietWeek()
	clicks = append(clicks, push(api, 3, 5)...)
	if clicks[3].update >= clicks[2].update {
		t.Fatalf("update %d after the quiet week follows %d, want a lower id", clicks[3].update, clicks[2].update)
	}
	api.Await(t, "6 answers", func() bool { return len(api.Answers()) == 6 })
	api.WaitPolling(t, 1)
	if err := stop(); err != nil {
		t.Fatalf("Listen: %v", err)
	}
	checkHandledOnce(t, api, rec, clicks)
	if n := api.Queued(); n != 0 {
		t.Errorf("%d updates left unconfirmed after every click was handled", n)
	}
	if n := countCalls(api, notifytest.TelegramGetUpdates, true); n > 6 {
		t.Errorf("%d polls for two batches of clicks, want a few", n)
	}
}

// TestARestartReadsAgainTheClickItHadNotHandled: a listener stopped while
// the core handles its third click of five leaves that click and the next
// ones to Telegram, and confirms the two it handled; the next listener
// (another process) reads and handles the three, each answered once.
func TestARestartReadsAgainTheClickItHadNotHandled(t *testing.T) {
	clk := clock.NewFake(sinktest.Epoch)
	api := newAPI(t, clk)
	clicks := push(api, 5, 777)
	third := make(chan struct{})
	first := &recorder{api: api, result: func(ctx context.Context, n int, a notify.Action) (notify.ActionResult, error) {
		if n == 3 {
			close(third)
			<-ctx.Done()
			return notify.ActionResult{}, ctx.Err()
		}
		return notify.ActionResult{Text: "Done: " + string(a.Kind)}, nil
	}}
	stop := listen(t, clk, listener(t, clk, api, token, nil), first)
	<-third
	if err := stop(); err != nil {
		t.Fatalf("Listen: %v", err)
	}
	if api.Unconfirmed(clicks[1].query) || !api.Unconfirmed(clicks[2].query) {
		t.Fatalf("after the stop, click 2 unconfirmed %v, click 3 %v: want 2 confirmed, 3 not",
			api.Unconfirmed(clicks[1].query), api.Unconfirmed(clicks[2].query))
	}
	second := &recorder{api: api}
	listen(t, clk, listener(t, clk, api, token, nil), second)
	api.Await(t, "5 answers", func() bool { return len(api.Answers()) == 5 })
	checkHandledOnce(t, api, first, clicks[:2])
	second.confirmed = append(second.confirmed, first.confirmed...)
	checkHandledOnce(t, api, second, clicks[2:])
}

// TestANotAllowedClickIsAnsweredWithAnAlert: the core's text reaches the
// person who clicked as an alert when they may not act (answerCallbackQuery
// show_alert: "If True, an alert will be shown by the client instead of a
// notification at the top of the chat screen"), cut to the documented
// "0-200 characters"; a failure of the core is an alert too; a button relay
// does not make and other updates are answered or passed without reaching
// the core; a click on another chat of the bot names no sink.
func TestANotAllowedClickIsAnsweredWithAnAlert(t *testing.T) {
	clk := clock.NewFake(sinktest.Epoch)
	api := newAPI(t, clk)
	api.AddChat(notifytest.TelegramChat{ID: -1009, Title: "Other"})
	rec := &recorder{api: api, result: func(_ context.Context, _ int, a notify.Action) (notify.ActionResult, error) {
		switch a.Actor.ID {
		case "666":
			return notify.ActionResult{NotAllowed: true, Text: "Only the on-call team may acknowledge " + strings.Repeat("this alarm ", 30)}, nil
		case "500":
			return notify.ActionResult{}, errors.New("the store is closed")
		}
		return notify.ActionResult{Applied: a.Alarms, Text: "Acknowledged"}, nil
	}}
	logs := &sinktest.LogBuffer{}
	listen(t, clk, listener(t, clk, api, token, logs), rec)
	api.PushMessage(chatID, "hello bot")
	_, denied := api.PushCallback(notifytest.TelegramUser{ID: 666, Username: "mallory"}, chatID, 5, "a:x1")
	_, failed := api.PushCallback(notifytest.TelegramUser{ID: 500, FirstName: "Sam"}, chatID, 5, "a:x1")
	_, unknown := api.PushCallback(notifytest.TelegramUser{ID: 42, Username: "alice"}, chatID, 5, "vote:yes")
	_, other := api.PushCallback(notifytest.TelegramUser{ID: 42, Username: "alice"}, -1009, 5, "a:x2")
	api.Await(t, "4 answers", func() bool { return len(api.Answers()) == 4 })
	byID := map[string]notifytest.TelegramAnswer{}
	for _, a := range api.Answers() {
		byID[a.CallbackQueryID] = a
	}
	if a := byID[denied]; !a.ShowAlert || !strings.HasPrefix(a.Text, "Only the on-call team") || len([]rune(a.Text)) != 200 {
		t.Errorf("the click not allowed was answered %q (%d characters), alert %v; want the core's text cut to 200, as an alert",
			a.Text, len([]rune(a.Text)), a.ShowAlert)
	}
	if a := byID[failed]; !a.ShowAlert || !strings.Contains(a.Text, "could not record") {
		t.Errorf("the click the core failed was answered %+v", a)
	}
	if a := byID[unknown]; a.ShowAlert || a.Text == "" {
		t.Errorf("the unknown button was answered %+v", a)
	}
	if a := byID[other]; a.Text != "Acknowledged" || a.ShowAlert {
		t.Errorf("the click in another chat was answered %+v", a)
	}
	acts := rec.actions()
	if len(acts) != 2 || acts[0].Ref != denied || acts[0].Sink != "tg" || acts[1].Ref != other || acts[1].Sink != "" {
		t.Errorf("the core was handed %+v, want the click not allowed (sink tg) and the one in another chat (no sink)", acts)
	}
	if !strings.Contains(logs.String(), "the store is closed") {
		t.Errorf("the core's failure is not logged:\n%s", logs.String())
	}
}

// TestAClickNamesTheSinkOfTheChatAndTopicItCameFrom: the one poller of a
// bot reads the clicks on the messages of every sink of the bot, and a
// click names the sink posting to the chat of the message that carried the
// button, and to its forum topic (the Bot API's Message: "message_thread_id:
// Optional. Unique identifier of a message thread to which the message
// belongs; for supergroups only", "is_topic_message: Optional. True, if the
// message is sent to a forum topic"), whether the sink names the chat by
// id or by @username. A message the sink posts to a forum's general topic
// names it; a message Telegram no longer shows (an inaccessible message:
// its chat, no topic) names the first sink of its chat, which shares its
// digests; a chat no sink of the bot posts to names none, though a sink of
// another bot posts there.
func TestAClickNamesTheSinkOfTheChatAndTopicItCameFrom(t *testing.T) {
	const storage, elsewhere = -1005550001, -1005550002
	const otherBot = "7000002:AAHanotherBotsToken_abcdef123456789"
	clk := clock.NewFake(sinktest.Epoch)
	api := newAPI(t, clk)
	api.AddChat(notifytest.TelegramChat{ID: storage, Title: "Storage", Topics: []int{3, 9}})
	api.AddChat(notifytest.TelegramChat{ID: elsewhere, Title: "Elsewhere"})
	sink := func(name, tok, chat, extra string) notify.Listener {
		return build(t, name, clk, notify.NewLimits(clk), api.URL(), tok, chat, "buttons: true\n"+extra, nil).(notify.Listener)
	}
	plant := sink("plant", token, "@plant_alarms", "")
	urgent := sink("plant-urgent", token, strconv.Itoa(chatID), "message_thread_id: 7\n")
	storage3 := sink("storage-3", token, strconv.Itoa(storage), "message_thread_id: 3\n")
	storage9 := sink("storage-9", token, strconv.Itoa(storage), "message_thread_id: 9\n")
	other := sink("other-bot", otherBot, strconv.Itoa(elsewhere), "")
	message := func(s notify.Sink, id string) int {
		t.Helper()
		res, err := send(t, clk, s, sinktest.Event(id, 0, event.Start), nil)
		if err != nil {
			t.Fatal(err)
		}
		n, _ := strconv.Atoi(res.Memory[telegram.MemoryMessageID])
		return n
	}
	rec := &recorder{api: api}
	gl, ok := urgent.(notify.GroupListener)
	if !ok {
		t.Fatal("a telegram sink is no notify.GroupListener")
	}
	listenWith(t, clk, func(ctx context.Context) error {
		return gl.ListenFor(ctx, rec, []notify.Listener{other, plant, urgent, storage3, storage9})
	})
	alice := notifytest.TelegramUser{ID: 42, Username: "alice"}
	want := map[string]string{}
	for _, c := range []struct {
		sink string
		chat int64
		msg  int
	}{
		{"plant", chatID, message(plant, "p1")},
		{"plant-urgent", chatID, message(urgent, "u1")},
		{"storage-9", storage, message(storage9, "s9")},
		{"storage-3", storage, message(storage3, "s3")},
		{"storage-3", storage, 99999},
		{"", elsewhere, 5},
	} {
		_, qid := api.PushCallback(alice, c.chat, c.msg, "a:x1")
		want[qid] = c.sink
	}
	api.Await(t, "6 answers", func() bool { return len(api.Answers()) == 6 })
	got := map[string]string{}
	for _, a := range rec.actions() {
		got[a.Ref] = a.Sink
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("the clicks named the sinks (by callback query)\n%v, want\n%v", got, want)
	}
}

// TestTelegramsAnswersToPollsAreHonoured: a 429's parameters.retry_after is
// waited out before the next poll; a webhook (409) is logged saying to
// delete it and polled again until it is gone; a refused token ends Listen
// with an error that names the variable and holds no token.
func TestTelegramsAnswersToPollsAreHonoured(t *testing.T) {
	clk := clock.NewFake(sinktest.Epoch)
	api := newAPI(t, clk)
	logs := &sinktest.LogBuffer{}
	api.FailPolls(notifytest.TelegramPollRetryAfter)
	api.SetWebhook(true)
	rec := &recorder{api: api}
	stop := listen(t, clk, listener(t, clk, api, token, logs), rec)
	polls := func() []notifytest.TelegramCall {
		var out []notifytest.TelegramCall
		for _, c := range api.Calls() {
			if c.Method == notifytest.TelegramGetUpdates {
				out = append(out, c)
			}
		}
		return out
	}
	api.Await(t, "3 polls", func() bool { return len(polls()) >= 3 })
	p := polls()
	if p[0].Status != 429 || p[1].At.Sub(p[0].At) != notifytest.TelegramPollRetryAfterSeconds*time.Second || p[1].Status != 409 {
		t.Errorf("polls %+v, want the 429, then after its retry_after the webhook's 409", p[:2])
	}
	if !strings.Contains(logs.String(), "deleteWebhook") {
		t.Errorf("the log does not say to delete the webhook:\n%s", logs.String())
	}
	api.SetWebhook(false)
	clicks := push(api, 1, 5)
	api.Await(t, "the click's answer", func() bool { return len(api.Answers()) == 1 })
	if err := stop(); err != nil {
		t.Fatalf("Listen: %v", err)
	}
	checkHandledOnce(t, api, rec, clicks)

	const revoked = "7000001:AAHrevokedTokenOfTheBot_abcdef12345"
	done := make(chan error, 1)
	go func() { done <- listener(t, clk, api, revoked, logs).Listen(context.Background(), rec) }()
	var err error
	select {
	case err = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Listen with a refused token did not return")
	}
	if err == nil || !strings.Contains(err.Error(), "401") || !strings.Contains(err.Error(), "TG_TOKEN") {
		t.Errorf("Listen with a refused token: %v, want a 401 naming TG_TOKEN", err)
	}
	redacttest.AssertNoSecret(t, []string{token, revoked}, map[string]string{"error": fmt.Sprint(err), "log": logs.String()})
}

// TestSinksOfOneBotShareOneListenKey: the key is the bot's, the same for
// every sink of its token and never the token; without buttons there is
// none.
func TestSinksOfOneBotShareOneListenKey(t *testing.T) {
	clk := clock.NewFake(sinktest.Epoch)
	api := newAPI(t, clk)
	key := func(tok, chat, extra string) string {
		return build(t, "tg", clk, notify.NewLimits(clk), api.URL(), tok, chat, extra, nil).(notify.Listener).ListenKey()
	}
	const other = "7000002:AAHanotherBotsToken_abcdef123456789"
	a, b, c := key(token, "-1001234567890", "buttons: true\n"), key(token, "@plant_alarms", "buttons: true\n"), key(other, "-1001234567890", "buttons: true\n")
	if !strings.HasPrefix(a, "telegram-bot:") || a != b || a == c {
		t.Errorf("keys %q, %q (same bot) and %q (another bot)", a, b, c)
	}
	if k := key(token, "-1001234567890", ""); k != "" {
		t.Errorf("without buttons the key is %q, want none", k)
	}
	redacttest.AssertNoSecret(t, []string{token, other, strings.Split(token, ":")[1]}, map[string]string{"key": a + " " + c})
}

// A listener run for one sink of a bot (Listen, as a relay built before
// ListenFor would run it) is not told the bot's other sinks: a click in a
// chat it does not post to names no sink, and says where the message is,
// by the chat's id and @username, so that Acknowledge all still finds the
// digest of that chat (manage looks it up there).
func TestAClickInAnotherChatOfTheBotSaysWhereItCameFrom(t *testing.T) {
	const second = -1005550003
	clk := clock.NewFake(sinktest.Epoch)
	api := newAPI(t, clk)
	api.AddChat(notifytest.TelegramChat{ID: second, Title: "Second", Username: "second_plant"})
	first := build(t, "first", clk, notify.NewLimits(clk), api.URL(), token, strconv.Itoa(chatID), "buttons: true\n", nil).(notify.Listener)
	rec := &recorder{api: api}
	listen(t, clk, first, rec)
	alice := notifytest.TelegramUser{ID: 42, Username: "alice"}
	api.PushCallback(alice, chatID, 1, "da:20261128T124939Z-1")
	api.PushCallback(alice, second, 2, "da:20261128T124939Z-1")
	api.Await(t, "2 answers", func() bool { return len(api.Answers()) == 2 })
	acts := rec.actions()
	if len(acts) != 2 || acts[0].Sink != "first" || len(acts[0].Destinations) != 0 {
		t.Fatalf("the click in the sink's own chat: %+v; want it to name the sink", acts)
	}
	if a := acts[1]; a.Sink != "" || !slices.Equal(a.Destinations, []string{"telegram:-1005550003", "telegram:@second_plant"}) {
		t.Fatalf("the click in the second chat: sink %q, destinations %v; want none, and the chat by id and @username", a.Sink, a.Destinations)
	}
}
