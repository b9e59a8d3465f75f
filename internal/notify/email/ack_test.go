package email_test

import (
	"strings"
	"testing"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify/email"
	"github.com/relay-energy/relay/internal/notify/sinktest"
	"github.com/relay-energy/relay/internal/notify/sinktype"
)

// A mail carries no buttons: the start of an alarm people can acknowledge
// ends its text with the command (before the signature, after a text
// template's text) and its HTML with the command escaped; its end does
// not.
func TestAStartPeopleCanAcknowledgeEndsWithTheCommand(t *testing.T) {
	const base = "smtp: smtp.example.com:587\nusername_env: SMTP_USER\npassword_env: SMTP_PASSWORD\n" +
		"from: Relay Alarms <alarms@example.com>\nto: [ops@example.com]\n"
	sinktest.AckRendering(t, email.Type,
		sinktest.AckCase{Name: "default text", Options: base, Env: env},
		sinktest.AckCase{Name: "text template", Options: base + "text: 'Look at {{.DeviceSN}}.'\n", Env: env})
}

func TestTheAcknowledgeCommandReachesBothPartsOfTheMail(t *testing.T) {
	srv, files := startSMTP(t)
	clk := clock.NewFake(sinktest.Epoch)
	s := sinktest.Build(t, email.Type, "mail", options(srv, files), env, sinktype.Deps{Clock: clk})
	ev := sinktest.Event("a1", 0, event.Start)
	ev.Data.AckCommand = "relay ack a1 --by <you>"
	if _, err := sinktest.SendEvent(t, clk, s, ev, nil); err != nil {
		t.Fatal(err)
	}
	m := byOrigin(t, srv, "a1", event.Start)
	plain, err := m.Part("text/plain")
	if err != nil {
		t.Fatal(err)
	}
	plain = strings.ReplaceAll(plain, "\r\n", "\n")
	text, sig, _ := strings.Cut(plain, "\n-- \n")
	if !strings.HasSuffix(strings.TrimRight(text, "\n"), "To acknowledge: relay ack a1 --by <you>") || strings.Contains(sig, "acknowledge") {
		t.Errorf("the text does not end with the command before the signature:\n%s", plain)
	}
	htmlPart, err := m.Part("text/html")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(htmlPart, "To acknowledge: relay ack a1 --by &lt;you&gt;") {
		t.Errorf("the HTML does not hold the command, escaped:\n%s", htmlPart)
	}
}
