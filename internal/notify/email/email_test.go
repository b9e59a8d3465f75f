package email_test

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/notify/email"
	"github.com/relay-energy/relay/internal/notify/notifytest"
	"github.com/relay-energy/relay/internal/notify/sinktest"
	"github.com/relay-energy/relay/internal/notify/sinktype"
	"github.com/relay-energy/relay/internal/redact/redacttest"
)

// build decodes yaml with vars and builds the sink "mail" on clk.
func build(t *testing.T, clk *clock.Fake, yaml string, vars map[string]string, deps sinktype.Deps) notify.Sink {
	t.Helper()
	deps.Clock = clk
	if deps.Limits == nil {
		deps.Limits = notify.NewLimits(clk)
	}
	return sinktest.Build(t, email.Type, "mail", yaml, vars, deps)
}

// mailer starts a fake submission server, as startSMTP does, and builds a
// sink sending through it on a fake clock, with extra option lines.
func mailer(t *testing.T, extra string) (*clock.Fake, *notifytest.SMTP, notify.Sink) {
	t.Helper()
	clk := clock.NewFake(sinktest.Epoch)
	srv, files := startSMTP(t)
	return clk, srv, build(t, clk, options(srv, files)+extra, env, sinktype.Deps{})
}

func send(t *testing.T, clk *clock.Fake, s notify.Sink, ev event.Event, memory map[string]string) (notify.Result, error) {
	t.Helper()
	return sinktest.SendEvent(t, clk, s, ev, memory)
}

func TestAMailGoesOverSTARTTLSWithAuthAndShowsTheAlarm(t *testing.T) {
	clk, srv, s := mailer(t, "cc: [grid-team@example.com]\n")
	res, err := send(t, clk, s, sinktest.Event("a1", 1, event.Start), nil)
	if err != nil {
		t.Fatal(err)
	}
	msgs := srv.Messages()
	if len(msgs) != 1 {
		t.Fatalf("the server took %d mails, want 1", len(msgs))
	}
	m := msgs[0]
	if !m.TLS || m.User != user || m.From != "alarms@example.com" ||
		!slices.Equal(m.To, []string{"ops@example.com", "oncall@example.com", "grid-team@example.com"}) {
		t.Errorf("envelope %s -> %v, tls %v, user %q", m.From, m.To, m.TLS, m.User)
	}
	sess := srv.Sessions()[0]
	if !slices.Equal(sess.Commands[:4], []string{"EHLO", "STARTTLS", "EHLO", "AUTH"}) || !sess.Quit {
		t.Errorf("session %v, quit %v: want EHLO, STARTTLS, EHLO, AUTH first and QUIT last", sess.Commands, sess.Quit)
	}
	for header, want := range map[string]string{
		"Subject":        "[SEVERE] E1023 Grid overvoltage <phase A> & *B* at North Park_1 [PV] / Inverter #3",
		"From":           `"Relay Alarms" <alarms@example.com>`,
		"Cc":             "<grid-team@example.com>",
		"Date":           sinktest.Epoch.Format(time.RFC1123Z),
		"Message-ID":     res.Memory[email.MemoryMessageID],
		"Auto-Submitted": "auto-generated",
		"In-Reply-To":    "",
	} {
		if got := m.Header(header); got != want {
			t.Errorf("%s: %q, want %q", header, got, want)
		}
	}
	if id := res.Memory[email.MemoryMessageID]; !strings.HasPrefix(id, "<a1.start.") || !strings.HasSuffix(id, "@example.com>") {
		t.Errorf("memory %v, want the start's Message-ID", res.Memory)
	}
	plain, err := m.Part("text/plain")
	if err != nil || !strings.Contains(plain, "SEVERE alarm: E1023 Grid overvoltage <phase A> & *B*") || !strings.Contains(plain, "Alarm:    a1") {
		t.Errorf("plain body (%v):\n%s", err, plain)
	}
	html, err := m.Part("text/html")
	if err != nil || !strings.Contains(html, "<b>E1023 Grid overvoltage &lt;phase A&gt; &amp; *B*</b>") ||
		!strings.Contains(html, "background:#e65100") || strings.Contains(html, "<phase A>") {
		t.Errorf("HTML body not escaped or without the severe badge (%v):\n%s", err, html)
	}
}

func TestTheEndThreadsUnderTheStartAfterARestart(t *testing.T) {
	clk := clock.NewFake(sinktest.Epoch)
	srv, files := startSMTP(t)
	res, err := send(t, clk, build(t, clk, options(srv, files), env, sinktype.Deps{}), sinktest.Event("t1", 2, event.Start), nil)
	if err != nil {
		t.Fatal(err)
	}
	startID := res.Memory[email.MemoryMessageID]
	// A restart: a new sink, the memory from the store.
	clk.Advance(17 * time.Minute)
	res, err = send(t, clk, build(t, clk, options(srv, files), env, sinktype.Deps{}), sinktest.Event("t1", 2, event.End), res.Memory)
	if err != nil {
		t.Fatal(err)
	}
	if res.Memory != nil {
		t.Errorf("the end replaced the memory with %v", res.Memory)
	}
	// An end whose memory was lost replies to the same, computed, start.
	if _, err := send(t, clk, build(t, clk, options(srv, files), env, sinktype.Deps{}), sinktest.Event("t1", 2, event.Invalid), nil); err != nil {
		t.Fatal(err)
	}
	msgs := srv.Messages()
	for _, m := range msgs[1:] {
		if m.Header("In-Reply-To") != startID || m.Header("References") != startID {
			t.Errorf("%s replies to %q, references %q, want %q", m.Header("Message-ID"), m.Header("In-Reply-To"), m.Header("References"), startID)
		}
		if want := "Re: " + msgs[0].Header("Subject"); m.Header("Subject") != want {
			t.Errorf("subject %q, want %q", m.Header("Subject"), want)
		}
	}
	if d := msgs[1].Header("Date"); d != sinktest.Epoch.Add(17*time.Minute).Format(time.RFC1123Z) {
		t.Errorf("the end is dated %s, not by the sink's clock", d)
	}
	if plain, _ := msgs[1].Part("text/plain"); !strings.HasPrefix(plain, "Resolved: MAJOR alarm E1023") || !strings.Contains(plain, "after 17m") {
		t.Errorf("the end does not open with its outcome:\n%s", plain)
	}
	// Another sink sending to other people has Message-IDs of its own.
	other := strings.Replace(options(srv, files), "to: [ops@example.com, oncall@example.com]", "to: [board@example.com]", 1)
	res2, err := send(t, clk, build(t, clk, other, env, sinktype.Deps{}), sinktest.Event("t1", 2, event.Start), nil)
	if err != nil {
		t.Fatal(err)
	}
	if res2.Memory[email.MemoryMessageID] == startID {
		t.Errorf("two sinks to different people share the Message-ID %s", startID)
	}
}

func TestAWrongPasswordIsDeadLetteredNamingTheVariablesNotThePassword(t *testing.T) {
	clk := clock.NewFake(sinktest.Epoch)
	srv, files := startSMTP(t)
	var logs bytes.Buffer
	wrong := map[string]string{"SMTP_USER": user, "SMTP_PASSWORD": "Not-The-Passw0rd"}
	s := build(t, clk, options(srv, files), wrong, sinktype.Deps{Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	res, err := send(t, clk, s, sinktest.Event("a1", 1, event.Start), nil)
	if err == nil || res.Retry {
		t.Fatalf("wrong password: retry %v (%v), want a dead letter", res.Retry, err)
	}
	for _, want := range []string{`email sink "mail"`, "a1:start", "535", "SMTP_USER", "SMTP_PASSWORD"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not say %q: %v", want, err)
		}
	}
	redacttest.AssertNoSecret(t, []string{"Not-The-Passw0rd", password}, map[string]string{"error": err.Error(), "log": logs.String()})
	if len(srv.Messages()) != 0 {
		t.Error("a mail was taken")
	}
}

func TestServerRepliesAreRetriedWhenTemporaryAndDeadLetteredWhenNot(t *testing.T) {
	cases := []struct {
		verb  string
		code  int
		text  string
		retry bool
		says  string
	}{
		{"CONNECT", 421, "4.3.2 Service not available, closing transmission channel", true, "421"},
		{"AUTH", 454, "4.7.0 Temporary authentication failure", true, "454"},
		{"MAIL", 451, "4.3.0 Temporary failure", true, "451"},
		{"RCPT", 450, "4.2.0 Mailbox busy", true, "450"},
		{"RCPT", 451, "4.3.0 Temporary lookup failure", true, "451"},
		{"RCPT", 452, "4.5.3 Too many recipients", true, "452"},
		{"DATA", 451, "4.3.0 Queue file write error", true, "451"},
		{"RCPT", 550, "5.1.1 <ops@example.com>: Recipient address rejected: User unknown", false, "to <ops@example.com>, <oncall@example.com>: check to and cc"},
		{"MAIL", 553, "5.7.1 <alarms@example.com>: Sender address rejected: not owned by user", false, "check from"},
		{"DATA", 554, "5.7.1 Message rejected", false, "refused the message: 554"},
	}
	for _, c := range cases {
		clk, srv, s := mailer(t, "")
		srv.FailNext(c.verb, c.code, c.text)
		if c.verb == "RCPT" && c.code >= 500 {
			// Both recipients refused for good: nobody is left to send to.
			srv.FailNext(c.verb, c.code, c.text)
		}
		res, err := send(t, clk, s, sinktest.Event("f1", 0, event.Start), nil)
		if err == nil {
			t.Errorf("%s %d: delivered, want an error", c.verb, c.code)
			continue
		}
		if res.Retry != c.retry || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s %d: retry %v, %v; want retry %v and an error saying %q", c.verb, c.code, res.Retry, err, c.retry, c.says)
		}
		if c.retry {
			if _, err := send(t, clk, s, sinktest.Event("f1", 0, event.Start), nil); err != nil || len(srv.Messages()) != 1 {
				t.Errorf("%s %d: the retry: %v, %d mails", c.verb, c.code, err, len(srv.Messages()))
			}
		}
	}
}

func TestAMailTheServerTookIsDeliveredEvenWhenQUITFails(t *testing.T) {
	clk := clock.NewFake(sinktest.Epoch)
	srv, files := startSMTP(t)
	srv.FailNext("QUIT", 421, "4.4.2 Timeout, closing connection")
	res, err := send(t, clk, build(t, clk, options(srv, files), env, sinktype.Deps{}), sinktest.Event("q1", 1, event.Start), nil)
	if err != nil || res.Memory[email.MemoryMessageID] == "" {
		t.Fatalf("%v, memory %v: a retry would send the mail twice", err, res.Memory)
	}
	if len(srv.Messages()) != 1 {
		t.Fatalf("%d mails, want 1", len(srv.Messages()))
	}
}

func TestAnUntrustedCertificateIsDeadLetteredNamingCAFile(t *testing.T) {
	clk := clock.NewFake(sinktest.Epoch)
	srv, files := startSMTP(t)
	yaml := strings.Replace(options(srv, files), "ca_file: "+files.CA+"\n", "", 1)
	res, err := send(t, clk, build(t, clk, yaml, env, sinktype.Deps{}), sinktest.Event("c1", 0, event.Start), nil)
	if err == nil || res.Retry || !strings.Contains(err.Error(), "ca_file") || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("retry %v (%v), want a dead letter naming the certificate and ca_file", res.Retry, err)
	}
}

func TestAServerWithoutSTARTTLSIsDeadLetteredNamingTLS(t *testing.T) {
	clk := clock.NewFake(sinktest.Epoch)
	srv := notifytest.NewSMTP(t, notifytest.SMTPConfig{})
	yaml := "smtp: " + srv.Addr() + "\nfrom: alarms@example.com\nto: [ops@example.com]\n"
	res, err := send(t, clk, build(t, clk, yaml, nil, sinktype.Deps{}), sinktest.Event("n1", 0, event.Start), nil)
	if err == nil || res.Retry || !strings.Contains(err.Error(), "STARTTLS") || !strings.Contains(err.Error(), "tls:") {
		t.Fatalf("retry %v (%v), want a dead letter saying to set tls", res.Retry, err)
	}
	// tls: none is the operator's choice for such a relay.
	if _, err := send(t, clk, build(t, clk, yaml+"tls: none\n", nil, sinktype.Deps{}), sinktest.Event("n1", 0, event.Start), nil); err != nil {
		t.Fatal(err)
	}
	if m := srv.Messages(); len(m) != 1 || m[0].TLS {
		t.Fatalf("%d mails, want one in clear", len(m))
	}
}

// Implicit TLS (port 465) with a login, to a server that is not localhost
// (go-mail sends a password in the clear to localhost only), with and
// without a fence: the fenced socket must not hide from go-mail that the
// session is encrypted.
func TestImplicitTLSDeliversFromTheFirstByte(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fence notify.Fence
	}{
		{"without a fence", nil},
		{"under a fence that allows", func() error { return nil }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clock.NewFake(sinktest.Epoch)
			files := notifytest.NewTLSFiles(t)
			srv := notifytest.NewSMTP(t, notifytest.SMTPConfig{Username: user, Password: password, TLS: files.Server, ImplicitTLS: true, Listen: "127.0.0.2:0"})
			s := build(t, clk, options(srv, files)+"tls: tls\n", env, sinktype.Deps{Fence: tc.fence})
			if _, err := send(t, clk, s, sinktest.Event("i1", 3, event.Start), nil); err != nil {
				t.Fatal(err)
			}
			if m := srv.Messages(); len(m) != 1 || !m[0].TLS || m[0].User != user {
				t.Fatalf("mails %d, want one over TLS as %s", len(m), user)
			}
			if slices.Contains(srv.Sessions()[0].Commands, "STARTTLS") {
				t.Error("STARTTLS on an encrypted connection")
			}
		})
	}
}

func TestAnUnreachableServerIsRetried(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	clk := clock.NewFake(sinktest.Epoch)
	s := build(t, clk, "smtp: "+addr+"\nfrom: alarms@example.com\nto: [ops@example.com]\n", nil, sinktype.Deps{})
	res, err := send(t, clk, s, sinktest.Event("u1", 0, event.Start), nil)
	if err == nil || !res.Retry || !strings.Contains(err.Error(), addr) {
		t.Fatalf("retry %v (%v), want a retried error naming %s", res.Retry, err, addr)
	}
}

func TestAFailingTemplateSendsTheDefaultAndSaysSo(t *testing.T) {
	clk := clock.NewFake(sinktest.Epoch)
	srv, files := startSMTP(t)
	var mu sync.Mutex
	var failed []string
	deps := sinktype.Deps{TemplateFailed: func(sink string, ev *event.Event, err error) {
		mu.Lock()
		defer mu.Unlock()
		failed = append(failed, sink+" "+ev.ID+": "+err.Error())
	}}
	yaml := options(srv, files) + "title: \"{{.LevelName}} {{.EventCode}} on\n  {{.Event.Data.DeviceName}}\"\n" +
		"text: \"{{if eq .OriginID \\\"boom\\\"}}{{index .Event.Data.Alarm 9999}}{{end}}Alarm {{.OriginID}} <{{.EventCode}}>\"\n"
	s := build(t, clk, yaml, env, deps)
	for _, origin := range []string{"fine", "boom"} {
		if _, err := send(t, clk, s, sinktest.Event(origin, 1, event.Start), nil); err != nil {
			t.Fatalf("%s: %v", origin, err)
		}
	}
	msgs := srv.Messages()
	if got := msgs[0].Header("Subject"); got != "severe E1023 on Inverter #3" {
		t.Errorf("templated subject %q", got)
	}
	if plain, _ := msgs[0].Part("text/plain"); plain != "Alarm fine <E1023>" {
		t.Errorf("templated body %q", plain)
	}
	if html, _ := msgs[0].Part("text/html"); !strings.Contains(html, "Alarm fine &lt;E1023&gt;") {
		t.Errorf("the HTML body does not show the templated text escaped:\n%s", html)
	}
	if plain, _ := msgs[1].Part("text/plain"); !strings.HasPrefix(plain, "SEVERE alarm: E1023") {
		t.Errorf("the failing template did not fall back to the default body:\n%s", plain)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(failed) != 1 || !strings.HasPrefix(failed[0], "mail boom:start: text template") {
		t.Errorf("TemplateFailed was told %q, want the text template's failure on boom:start", failed)
	}
}

func TestMailsToOneServerFromOneSenderArePaced(t *testing.T) {
	clk := clock.NewFake(sinktest.Epoch)
	srv, files := startSMTP(t)
	limits := notify.NewLimits(clk)
	a := build(t, clk, options(srv, files), env, sinktype.Deps{Limits: limits})
	b := build(t, clk, strings.Replace(options(srv, files), "oncall@example.com", "board@example.com", 1), env, sinktype.Deps{Limits: limits})
	for i := range email.PerWindow + 1 {
		s := a
		if i%2 == 1 {
			s = b
		}
		if _, err := send(t, clk, s, sinktest.Event("p"+string(rune('a'+i%26))+string(rune('a'+i/26)), 3, event.Start), nil); err != nil {
			t.Fatal(err)
		}
	}
	if waited := clk.Now().Sub(sinktest.Epoch); waited < email.Window {
		t.Fatalf("%d mails from two sinks to one server in %s, want the last held until %s", email.PerWindow+1, waited, email.Window)
	}
}

func TestProbeGoesUpToAuthAndSendsNothing(t *testing.T) {
	srv, files := startSMTP(t)
	cfg := sinktest.Decode(t, email.Type, options(srv, files), env)
	line, err := cfg.Probe(context.Background(), sinktype.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{srv.Addr(), "notifytest greets", "STARTTLS TLS 1.3", "AUTH as $SMTP_USER accepted", "nothing was sent"} {
		if !strings.Contains(line, want) {
			t.Errorf("probe line %q does not say %q", line, want)
		}
	}
	sess := srv.Sessions()
	if len(srv.Messages()) != 0 || len(sess) != 1 || slices.Contains(sess[0].Commands, "MAIL") || !sess[0].Quit || sess[0].User != user {
		t.Errorf("sessions %+v, want one that authenticated and quit without MAIL", sess)
	}
	bad := sinktest.Decode(t, email.Type, options(srv, files), map[string]string{"SMTP_USER": user, "SMTP_PASSWORD": "Wrong-Passw0rd"})
	if _, err := bad.Probe(context.Background(), sinktype.Deps{}); err == nil || !strings.Contains(err.Error(), "SMTP_PASSWORD") || strings.Contains(err.Error(), "Wrong-Passw0rd") {
		t.Errorf("probe with a wrong password: %v", err)
	}
}

func TestOptionsAreCheckedAtDecode(t *testing.T) {
	files := notifytest.NewTLSFiles(t)
	base := "from: alarms@example.com\nto: [ops@example.com]\n"
	cases := []struct {
		name, yaml string
		env        map[string]string
		want       string
	}{
		{"no smtp", base, nil, "missing: an email sink needs smtp"},
		{"no port", "smtp: smtp.example.com\n" + base, nil, "want host:port"},
		{"a URL", "smtp: smtp://smtp.example.com:587\n" + base, nil, "without a scheme"},
		{"465 with starttls", "smtp: smtp.example.com:465\n" + base, nil, "set tls: tls"},
		{"587 with implicit TLS", "smtp: smtp.example.com:587\ntls: tls\n" + base, nil, "set tls: starttls"},
		{"bad tls", "smtp: smtp.example.com:587\ntls: ssl\n" + base, nil, `"ssl" is not allowed`},
		{"no from", "smtp: smtp.example.com:587\nto: [ops@example.com]\n", nil, "missing: an email sink needs from"},
		{"bad from", "smtp: smtp.example.com:587\nfrom: alarms\nto: [ops@example.com]\n", nil, "not an email address"},
		{"no to", "smtp: smtp.example.com:587\nfrom: alarms@example.com\n", nil, "missing: an email sink needs to"},
		{"bad cc", "smtp: smtp.example.com:587\n" + base + "cc: [\"ops at example\"]\n", nil, "not an email address"},
		{"twice", "smtp: smtp.example.com:587\n" + base + "cc: [OPS@example.com]\n", nil, "listed twice"},
		{"user without password", "smtp: smtp.example.com:587\n" + base + "username_env: U\n", map[string]string{"U": "u"}, "needs password_env too"},
		{"password unset", "smtp: smtp.example.com:587\n" + base + "username_env: U\npassword_env: P\n", map[string]string{"U": "u"}, "P"},
		{"auth in clear", "smtp: smtp.example.com:25\ntls: none\n" + base + "username_env: U\npassword_env: P\n",
			map[string]string{"U": "u", "P": password}, "password as it is"},
		{"ca_file missing", "smtp: smtp.example.com:587\n" + base + "ca_file: /nonexistent/ca.pem\n", nil, "cannot read"},
		{"ca_file not PEM", "smtp: smtp.example.com:587\n" + base + "ca_file: " + files.Key + "\n", nil, "no PEM certificate"},
		{"ca_file in clear", "smtp: smtp.example.com:25\ntls: none\n" + base + "ca_file: " + files.CA + "\n", nil, "ca_file is for TLS"},
		{"unknown key", "smtp: smtp.example.com:587\n" + base + "bcc: [x@example.com]\n", nil, `unknown key "bcc"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := sinktest.DecodeErr(email.Type, c.yaml, c.env)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want a problem saying %q", err, c.want)
			}
			if strings.Contains(err.Error(), password) {
				t.Errorf("the problem holds the password: %v", err)
			}
		})
	}
}

func TestTLSNoneIsAllowedWithAWarning(t *testing.T) {
	cfg := sinktest.Decode(t, email.Type, "smtp: relay.internal:25\ntls: none\nfrom: alarms@example.com\nto: [ops@example.com]\n", nil)
	if summary := strings.Join(cfg.Summary(), ", "); !strings.Contains(summary, "WARNING") || !strings.Contains(summary, "in clear") {
		t.Errorf("summary %q does not warn about tls: none", summary)
	}
}

// TestOneRecipientRefusedForGoodIsNotRetriedForever: go-mail keeps only
// whether the last refused recipient was refused for now; a recipient
// refused for good before it still makes the mail a dead letter, instead of
// a retry until max_age that can never succeed.
func TestOneRecipientRefusedForGoodIsNotRetriedForever(t *testing.T) {
	clk, srv, s := mailer(t, "cc: [grid-team@example.com]\n")
	srv.FailNext("RCPT", 550, "5.1.1 <ops@example.com>: Recipient address rejected: User unknown")
	srv.FailNext("RCPT", 451, "4.3.0 Temporary lookup failure")
	res, err := send(t, clk, s, sinktest.Event("r1", 0, event.Start), nil)
	if err == nil || res.Retry {
		t.Fatalf("retry %v, %v; want a dead letter naming the refused recipient", res.Retry, err)
	}
	if !strings.Contains(err.Error(), "550") {
		t.Errorf("the error does not name the 550: %v", err)
	}
}

// TestARecipientRefusedForGoodIsLeftOutAndTheOthersGetTheMail: one mailbox
// gone (550 5.1.1) does not keep the alarm from the other recipients: the
// same mail goes to them, and the log names who was left out.
func TestARecipientRefusedForGoodIsLeftOutAndTheOthersGetTheMail(t *testing.T) {
	clk := clock.NewFake(sinktest.Epoch)
	srv, files := startSMTP(t)
	var logs bytes.Buffer
	s := build(t, clk, options(srv, files)+"cc: [grid-team@example.com]\n", env,
		sinktype.Deps{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	srv.FailNext("RCPT", 550, "5.1.1 <ops@example.com>: Recipient address rejected: User unknown")
	if _, err := send(t, clk, s, sinktest.Event("gone1", 0, event.Start), nil); err != nil {
		t.Fatalf("the mail did not reach the other recipient: %v", err)
	}
	msgs := srv.Messages()
	if len(msgs) != 1 || strings.Join(msgs[0].To, " ") != "oncall@example.com grid-team@example.com" {
		t.Fatalf("the server took %d mails; want one, to the two recipients left", len(msgs))
	}
	if !strings.Contains(logs.String(), "left_out=ops@example.com") || !strings.Contains(logs.String(), "550") {
		t.Errorf("the log does not name who was left out and why:\n%s", logs.String())
	}
}

// A session that passed the sink's check before the lease ended, as when
// the replica is paused at that moment and resumes past its lease, sends no
// more once the fence refuses: not its first command, and not the mail of
// a session that had got as far as its recipients.
func TestAFenceThatClosesDuringTheSessionKeepsTheMailFromTheServer(t *testing.T) {
	for _, tc := range []struct {
		name string
		// closed says, from the commands the server has seen, whether the
		// lease has ended; the sink's own check comes first and is allowed.
		closed func(seen []string) bool
	}{
		{"after the sink's check", func([]string) bool { return true }},
		{"after the recipients", func(seen []string) bool { return slices.Contains(seen, "RCPT") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clock.NewFake(sinktest.Epoch)
			srv, files := startSMTP(t)
			var asked sync.Mutex
			first := true
			fence := func() error {
				asked.Lock()
				defer asked.Unlock()
				if first {
					first = false
					return nil
				}
				var seen []string
				for _, s := range srv.Sessions() {
					seen = append(seen, s.Commands...)
				}
				if tc.closed(seen) {
					return notifytest.ErrLeaseGone
				}
				return nil
			}
			s := build(t, clk, options(srv, files), env, sinktype.Deps{Fence: fence})
			if _, err := send(t, clk, s, sinktest.Event("a1", 1, event.Start), nil); err == nil {
				t.Error("the send succeeded, want it refused by the fence")
			}
			if msgs := srv.Messages(); len(msgs) != 0 {
				t.Fatalf("the server took %d mails after the fence refused", len(msgs))
			}
			var seen []string
			for _, s := range srv.Sessions() {
				seen = append(seen, s.Commands...)
			}
			if slices.Contains(seen, "DATA") {
				t.Errorf("the server saw %v: a DATA after the fence refused", seen)
			}
		})
	}
}
