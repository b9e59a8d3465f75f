package notifytest

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/smtp"
	"net/textproto"
	"os"
	"slices"
	"strings"
	"testing"
)

// The self-test of the SMTP fake uses net/smtp, the standard library's
// client, which implements STARTTLS and AUTH PLAIN as RFC 3207 and RFC 4616
// describe them.

const (
	smtpUser = "relay@example.com"
	smtpPass = "s3cret-Passw0rd"
)

func clientTLS(t *testing.T, files TLSFiles) *tls.Config {
	t.Helper()
	pem, err := os.ReadFile(files.CA)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	return &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}
}

func dialSMTP(t *testing.T, srv *SMTP) *smtp.Client {
	t.Helper()
	c, err := smtp.Dial(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if err := c.Hello("client.example"); err != nil {
		t.Fatal(err)
	}
	return c
}

// code returns the SMTP reply code of err, 0 for none.
func code(err error) int {
	var te *textproto.Error
	if errors.As(err, &te) {
		return te.Code
	}
	return 0
}

// loginAuth is AUTH LOGIN, which net/smtp lacks: the username and the
// password, each answering the server's 334 prompt.
type loginAuth struct{ user, pass string }

func (a loginAuth) Start(*smtp.ServerInfo) (string, []byte, error) { return "LOGIN", nil, nil }
func (a loginAuth) Next(prompt []byte, more bool) ([]byte, error) {
	switch {
	case !more:
		return nil, nil
	case string(prompt) == "Username:":
		return []byte(a.user), nil
	case string(prompt) == "Password:":
		return []byte(a.pass), nil
	}
	return nil, fmt.Errorf("unexpected prompt %q", prompt)
}

func TestSMTPFakeDeliversOverSTARTTLSWithAuthAndUnstuffsDots(t *testing.T) {
	for _, auth := range []smtp.Auth{
		smtp.PlainAuth("", smtpUser, smtpPass, "127.0.0.1"),
		loginAuth{smtpUser, smtpPass},
	} {
		files := NewTLSFiles(t)
		srv := NewSMTP(t, SMTPConfig{Username: smtpUser, Password: smtpPass, TLS: files.Server, RequireTLS: true})
		c := dialSMTP(t, srv)
		if ok, _ := c.Extension("STARTTLS"); !ok {
			t.Fatal("STARTTLS not advertised")
		}
		if err := c.StartTLS(clientTLS(t, files)); err != nil {
			t.Fatal(err)
		}
		if ok, mechs := c.Extension("AUTH"); !ok || mechs != "PLAIN LOGIN" {
			t.Fatalf("AUTH advertised %v %q, want PLAIN LOGIN", ok, mechs)
		}
		if err := c.Auth(auth); err != nil {
			t.Fatal(err)
		}
		if err := c.Mail("alarms@example.com"); err != nil {
			t.Fatal(err)
		}
		for _, rcpt := range []string{"ops@example.com", "oncall@example.com"} {
			if err := c.Rcpt(rcpt); err != nil {
				t.Fatal(err)
			}
		}
		w, err := c.Data()
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprint(w, "Subject: =?UTF-8?q?caf=C3=A9?=\r\nContent-Type: text/plain; charset=UTF-8\r\n\r\nline one\r\n.dotted\r\n..two\r\n")
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if err := c.Quit(); err != nil {
			t.Fatal(err)
		}
		msgs := srv.Messages()
		if len(msgs) != 1 {
			t.Fatalf("%d messages, want 1", len(msgs))
		}
		m := msgs[0]
		if m.From != "alarms@example.com" || !slices.Equal(m.To, []string{"ops@example.com", "oncall@example.com"}) || !m.TLS || m.User != smtpUser {
			t.Errorf("envelope %q %q tls %v user %q", m.From, m.To, m.TLS, m.User)
		}
		if got := m.Header("Subject"); got != "café" {
			t.Errorf("subject %q", got)
		}
		if body, err := m.Part("text/plain"); err != nil || body != "line one\r\n.dotted\r\n..two\r\n" {
			t.Errorf("body %q (%v), want the dots unstuffed", body, err)
		}
		s := srv.Sessions()[0]
		if !s.Quit || !s.TLS || !slices.Equal(s.Commands, []string{"EHLO", "STARTTLS", "EHLO", "AUTH", "MAIL", "RCPT", "RCPT", "DATA", "QUIT"}) {
			t.Errorf("session %+v", s)
		}
	}
}

func TestSMTPFakeRefusesAWrongPasswordWith535(t *testing.T) {
	files := NewTLSFiles(t)
	srv := NewSMTP(t, SMTPConfig{Username: smtpUser, Password: smtpPass, TLS: files.Server})
	c := dialSMTP(t, srv)
	if err := c.StartTLS(clientTLS(t, files)); err != nil {
		t.Fatal(err)
	}
	err := c.Auth(smtp.PlainAuth("", smtpUser, "wrong", "127.0.0.1"))
	if code(err) != 535 || !strings.Contains(err.Error(), "5.7.8") {
		t.Fatalf("wrong password: %v, want 535 5.7.8", err)
	}
	// net/smtp closes the connection after a refused AUTH.
	c = dialSMTP(t, srv)
	if err := c.StartTLS(clientTLS(t, files)); err != nil {
		t.Fatal(err)
	}
	if err := c.Mail("alarms@example.com"); code(err) != 530 {
		t.Fatalf("MAIL unauthenticated: %v, want 530", err)
	}
}

func TestSMTPFakeRefusesAuthAndMailBeforeSTARTTLSWhenTLSIsRequired(t *testing.T) {
	files := NewTLSFiles(t)
	srv := NewSMTP(t, SMTPConfig{Username: smtpUser, Password: smtpPass, TLS: files.Server, RequireTLS: true})
	c := dialSMTP(t, srv)
	// net/smtp sends PLAIN in clear only to localhost, as here.
	if err := c.Auth(smtp.PlainAuth("", smtpUser, smtpPass, "127.0.0.1")); code(err) != 538 {
		t.Fatalf("AUTH before STARTTLS: %v, want 538", err)
	}
	c = dialSMTP(t, srv)
	if err := c.Mail("alarms@example.com"); code(err) != 530 {
		t.Fatalf("MAIL before STARTTLS: %v, want 530", err)
	}
	if len(srv.Messages()) != 0 {
		t.Fatal("a message was accepted")
	}
}

func TestSMTPFakeAnswersScriptedFailures(t *testing.T) {
	srv := NewSMTP(t, SMTPConfig{})
	srv.FailNext("RCPT", 451, "4.3.0 Temporary lookup failure")
	srv.FailNext("RCPT", 550, "5.1.1 <gone@example.com>: Recipient address rejected")
	srv.FailNext("DATA", 554, "5.7.1 Message rejected as spam")
	c := dialSMTP(t, srv)
	if err := c.Mail("alarms@example.com"); err != nil {
		t.Fatal(err)
	}
	if err := c.Rcpt("ops@example.com"); code(err) != 451 {
		t.Fatalf("first RCPT: %v, want 451", err)
	}
	if err := c.Rcpt("gone@example.com"); code(err) != 550 {
		t.Fatalf("second RCPT: %v, want 550", err)
	}
	if err := c.Rcpt("ops@example.com"); err != nil {
		t.Fatal(err)
	}
	w, err := c.Data()
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprint(w, "Subject: x\r\n\r\nbody\r\n")
	if err := w.Close(); code(err) != 554 {
		t.Fatalf("end of data: %v, want 554", err)
	}
	if len(srv.Messages()) != 0 {
		t.Fatal("a refused message was recorded")
	}

	srv.FailNext("CONNECT", 421, "4.3.2 Service not available, closing transmission channel")
	if _, err := smtp.Dial(srv.Addr()); code(err) != 421 {
		t.Fatalf("busy server: %v, want 421 at the greeting", err)
	}
}

func TestSMTPFakeServesImplicitTLS(t *testing.T) {
	files := NewTLSFiles(t)
	srv := NewSMTP(t, SMTPConfig{TLS: files.Server, ImplicitTLS: true})
	conn, err := tls.Dial("tcp", srv.Addr(), clientTLS(t, files))
	if err != nil {
		t.Fatal(err)
	}
	c, err := smtp.NewClient(conn, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if ok, _ := c.Extension("STARTTLS"); ok {
		t.Error("STARTTLS advertised on an encrypted connection")
	}
	if err := c.Noop(); err != nil {
		t.Fatal(err)
	}
	if s := srv.Sessions()[0]; !s.TLS {
		t.Error("session not encrypted")
	}
}

func TestSMTPFakeRefusesOnceTheMessageItIsToldOf(t *testing.T) {
	srv := NewSMTP(t, SMTPConfig{})
	srv.RefuseMessage(451, "4.7.1 Try again later", func(m SMTPMessage) bool { return strings.Contains(m.Header("Subject"), "second") })
	send := func(subject string) error {
		c := dialSMTP(t, srv)
		if err := c.Mail("alarms@example.com"); err != nil {
			return err
		}
		if err := c.Rcpt("ops@example.com"); err != nil {
			return err
		}
		w, err := c.Data()
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "Subject: %s\r\n\r\nbody\r\n", subject)
		return w.Close()
	}
	for _, c := range []struct {
		subject string
		code    int
	}{{"first", 0}, {"second", 451}, {"second", 0}, {"third", 0}} {
		if err := send(c.subject); code(err) != c.code {
			t.Fatalf("message %q: %v, want reply %d", c.subject, err, c.code)
		}
	}
	var got []string
	for _, m := range srv.Messages() {
		got = append(got, m.Header("Subject"))
	}
	if !slices.Equal(got, []string{"first", "second", "third"}) {
		t.Fatalf("accepted %q, want first, second (on the second try) and third", got)
	}
}
