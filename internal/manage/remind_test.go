package manage_test

import (
	"strings"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/notify/notifytest"
)

// Item 6 in a channel without threads: a DingTalk robot, whose starts leave
// no memory, gets the start's message again with the note in its title every
// repeat, the first a repeat after the hold let the start out, across a
// restart; an alarm that ended, or whose start the hold withheld, gets none.
func TestScenarioRemindersInAChannelWithoutThreads(t *testing.T) {
	const token, secret = "c4e2d1b0a9f8e7d6c5b4a3f2e1d0c9b8a7f6e5d4c3b2a1f0e9d8c7b6a5f4e3d2", "SECrem1f5e0b9c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c3d2"
	clk := clock.NewFake(t0)
	robot := notifytest.NewDingTalk(t, token, secret, clk.Now)
	s := newScenarioWith(t, clk, rulesHead+"  - name: chat\n    type: dingtalk\n    url_env: DINGTALK_URL\n    secret_env: DINGTALK_SECRET\n"+`
routes:`+busRoute+`
  - name: people
    to: [chat]
    hold: 10m
    repeat: 1h
`, map[string]string{"DINGTALK_URL": robot.URL(), "DINGTALK_SECRET": secret})
	reminders := func() (long, other int) {
		for _, m := range robot.Accepted() {
			text := m.Text()
			if !strings.Contains(text, "Reminder, ongoing for") {
				continue
			}
			if strings.Contains(text, "E_LONG") {
				long++
			} else {
				other++
			}
		}
		return long, other
	}
	want := func(when string, n int) {
		t.Helper()
		long, other := reminders()
		if long != n || other != 0 {
			var all []string
			for _, m := range robot.Accepted() {
				all = append(all, m.Text())
			}
			t.Fatalf("%s: %d reminders of the long alarm and %d of others, want %d and 0; the robot got:\n%s",
				when, long, other, n, strings.Join(all, "\n---\n"))
		}
	}
	long := s.starts("long", "S1", "D1", "E_LONG", 0)
	short := s.starts("short", "S1", "D2", "E_SHORT", 1)
	blip := s.starts("blip", "S1", "D3", "E_BLIP", 1)
	s.apply(long, short, blip)
	s.advance(5 * time.Minute)
	s.apply(long, short, s.ends(blip)) // within the hold: withheld
	s.advance(6 * time.Minute)
	s.tick()
	starts := 0
	for _, m := range robot.Accepted() {
		if strings.Contains(m.Text(), "E_LONG") || strings.Contains(m.Text(), "E_SHORT") {
			starts++
		}
	}
	if starts != 2 || strings.Contains(s.dingtalkAll(robot), "E_BLIP") {
		t.Fatalf("after the hold the robot got %d starts and the blip %v, want the two starts and no blip", starts, strings.Contains(s.dingtalkAll(robot), "E_BLIP"))
	}
	s.advance(50 * time.Minute) // 1h01m after first sight, 51m after the start went out
	s.tick()
	want("an hour after first sight, within an hour of the start's message", 0)
	s.restart()
	s.apply(long, s.ends(short))
	s.advance(10 * time.Minute)
	s.tick()
	want("an hour after the start's message, after a restart", 1)
	if text := s.dingtalkAll(robot); !strings.Contains(text, "Reminder, ongoing for 1h") {
		t.Fatalf("the reminder does not say how long the alarm has been ongoing:\n%s", text)
	}
	s.advance(30 * time.Minute)
	s.tick()
	want("half an hour later", 1)
	s.advance(31 * time.Minute)
	s.tick()
	want("two hours after the start's message", 2)
	for range 3 {
		s.advance(time.Hour)
		s.tick()
	}
	want("five hours after the start's message", 5)
	s.apply(s.ends(long))
	s.advance(2 * time.Hour)
	s.tick()
	want("after the alarm ended", 5)
}

// dingtalkAll is every message the robot accepted, one after the other.
func (s *scenario) dingtalkAll(robot *notifytest.DingTalk) string {
	var b strings.Builder
	for _, m := range robot.Accepted() {
		b.WriteString(m.Text() + "\n")
	}
	return b.String()
}
