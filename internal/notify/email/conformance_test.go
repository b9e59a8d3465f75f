package email_test

import (
	"testing"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify/email"
	"github.com/relay-energy/relay/internal/notify/notifytest"
	"github.com/relay-energy/relay/internal/notify/sinktest"
)

const (
	user     = "relay-submit"
	password = "Sm7p-Passw0rd-42"
)

var env = map[string]string{"SMTP_USER": user, "SMTP_PASSWORD": password}

// options are the options of a sink sending through srv with files' CA.
func options(srv *notifytest.SMTP, files notifytest.TLSFiles) string {
	return "smtp: " + srv.Addr() + "\nca_file: " + files.CA + "\n" +
		"username_env: SMTP_USER\npassword_env: SMTP_PASSWORD\n" +
		"from: Relay Alarms <alarms@example.com>\nto: [ops@example.com, oncall@example.com]\n"
}

// startSMTP starts a fake submission server wanting STARTTLS and AUTH.
func startSMTP(t *testing.T) (*notifytest.SMTP, notifytest.TLSFiles) {
	files := notifytest.NewTLSFiles(t)
	srv := notifytest.NewSMTP(t, notifytest.SMTPConfig{Username: user, Password: password, TLS: files.Server, RequireTLS: true})
	return srv, files
}

// byOrigin returns the message the fake got for transition tr of origin.
func byOrigin(t *testing.T, srv *notifytest.SMTP, origin string, tr event.Transition) notifytest.SMTPMessage {
	t.Helper()
	for _, m := range srv.Messages() {
		if id := m.Header("Message-ID"); len(id) > 0 && hasPrefix(id, "<"+origin+"."+string(tr)+".") {
			return m
		}
	}
	t.Fatalf("no %s mail of %s among %d", tr, origin, len(srv.Messages()))
	return notifytest.SMTPMessage{}
}

func hasPrefix(s, p string) bool { return len(s) >= len(p) && s[:len(p)] == p }

func TestConformance(t *testing.T) {
	sinktest.Run(t, sinktest.Harness{
		Type: email.Type,
		Start: func(t *testing.T, clk *clock.Fake) sinktest.Vendor {
			srv, files := startSMTP(t)
			return sinktest.Vendor{
				Options: func(string) (string, map[string]string) { return options(srv, files), env },
				RenderOptions: func() (string, map[string]string) {
					return "smtp: smtp.example.com:587\nusername_env: SMTP_USER\npassword_env: SMTP_PASSWORD\n" +
						"from: Relay Alarms <alarms@example.com>\nto: [ops@example.com, oncall@example.com]\ncc: [grid-team@example.com]\n", env
				},
				Received: func() []string {
					var out []string
					for _, m := range srv.Messages() {
						body, err := m.Part("text/plain")
						if err != nil {
							t.Errorf("a mail without a text/plain part: %v", err)
						}
						out = append(out, m.Header("Subject")+"\n"+body)
					}
					return out
				},
				CheckPair: func(t *testing.T, start, end *event.Event) {
					s := byOrigin(t, srv, start.Data.OriginID, event.Start)
					e := byOrigin(t, srv, end.Data.OriginID, event.End)
					id := s.Header("Message-ID")
					if e.Header("In-Reply-To") != id || e.Header("References") != id {
						t.Errorf("the end replies to %q (references %q), want the start's %q",
							e.Header("In-Reply-To"), e.Header("References"), id)
					}
					if want := "Re: " + s.Header("Subject"); e.Header("Subject") != want {
						t.Errorf("the end's subject is %q, want %q so that Gmail threads it", e.Header("Subject"), want)
					}
				},
			}
		},
	})
}
