package notifytest

import (
	"bufio"
	"bytes"
	"cmp"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net"
	"net/mail"
	"net/textproto"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// SMTP limits of the fake, as a typical submission server (Postfix's
// defaults) sets them.
const (
	smtpMaxSize       = 10 << 20 // SIZE advertised in EHLO; larger messages get 552
	smtpMaxRecipients = 100      // more RCPTs in one transaction get 452
	smtpIdle          = 10 * time.Second
)

// SMTPConfig configures a fake SMTP server.
type SMTPConfig struct {
	// Username and Password, when set, are the one account AUTH PLAIN and
	// AUTH LOGIN accept; MAIL is then refused until the client has
	// authenticated. When unset, AUTH is not advertised.
	Username, Password string
	// TLS, when set, is offered with STARTTLS (or served from the first
	// byte with ImplicitTLS). The fake never asks for a client
	// certificate, as submission servers do not, so TLSFiles.Server can be
	// passed as it is.
	TLS *tls.Config
	// ImplicitTLS serves TLS from the first byte, as on port 465
	// (RFC 8314), instead of offering STARTTLS.
	ImplicitTLS bool
	// RequireTLS refuses AUTH before STARTTLS with 538 5.7.11 (RFC 4954
	// §6) and MAIL with 530 5.7.0 (RFC 3207 §4).
	RequireTLS bool
	// Listen is the address to listen on, 127.0.0.1:0 when empty. A
	// client exempts localhost from rules it keeps for remote servers
	// (go-mail sends AUTH PLAIN in the clear to 127.0.0.1 only): listen on
	// 127.0.0.2:0, which TLSFiles' server certificate also names, to be
	// treated as a remote server.
	Listen string
}

// SMTPMessage is one message the fake accepted: its envelope and the
// message as it came after DATA, dot-unstuffed, with its CRLFs.
type SMTPMessage struct {
	// From is the reverse path of MAIL FROM, without the angle brackets.
	From string
	// To are the forward paths of the accepted RCPT TOs.
	To []string
	// Data is the message.
	Data []byte
	// TLS says whether the session was encrypted.
	TLS bool
	// User is the user the session authenticated as ("" for none).
	User string
}

// SMTPSession is what happened on one connection to the fake.
type SMTPSession struct {
	// TLS says whether the session ended encrypted.
	TLS bool
	// User is the user it authenticated as ("" for none).
	User string
	// Commands are the verbs the client sent, in order (EHLO, STARTTLS,
	// AUTH, MAIL, ...), without their arguments.
	Commands []string
	// Quit says whether the client ended the session with QUIT.
	Quit bool
}

// SMTP is a fake SMTP submission server speaking RFC 5321 with the
// extensions a submission client needs: EHLO advertising 8BITMIME,
// ENHANCEDSTATUSCODES, SIZE, STARTTLS (RFC 3207) and AUTH PLAIN LOGIN
// (RFC 4954, RFC 4616; LOGIN as draft-murchison-sasl-login). AUTH checks the
// configured account and answers a wrong one with 535 5.7.8; DATA is read to
// the lone dot and dot-unstuffed. Any command's next answer can be scripted
// (FailNext), as a server under load (421, 451, 452) or refusing a mailbox
// (550, 553, 554) would answer. It records every session and every accepted
// message.
type SMTP struct {
	cfg SMTPConfig
	ln  net.Listener
	wg  sync.WaitGroup

	mu       sync.Mutex
	fail     map[string][]smtpReply
	refuse   []smtpRefusal
	messages []SMTPMessage
	sessions []*SMTPSession
	queued   int
}

type smtpReply struct {
	code int
	text string
}

type smtpRefusal struct {
	smtpReply
	match func(SMTPMessage) bool
}

// NewSMTP starts a fake SMTP server on 127.0.0.1 (or cfg.Listen). It is closed when the
// test ends.
func NewSMTP(t testing.TB, cfg SMTPConfig) *SMTP {
	t.Helper()
	if cfg.TLS != nil {
		c := cfg.TLS.Clone()
		c.ClientAuth = tls.NoClientCert
		c.ClientCAs = nil
		cfg.TLS = c
	}
	if cfg.ImplicitTLS && cfg.TLS == nil {
		t.Fatal("notifytest: ImplicitTLS needs TLS")
	}
	ln, err := net.Listen("tcp", cmp.Or(cfg.Listen, "127.0.0.1:0"))
	if err != nil {
		t.Fatalf("notifytest: smtp: %v", err)
	}
	s := &SMTP{cfg: cfg, ln: ln, fail: map[string][]smtpReply{}}
	s.wg.Add(1)
	go s.accept()
	t.Cleanup(func() {
		ln.Close()
		s.wg.Wait()
	})
	return s
}

// Addr returns the server's host:port.
func (s *SMTP) Addr() string { return s.ln.Addr().String() }

// FailNext makes the server answer the next command verb (EHLO, AUTH, MAIL,
// RCPT, DATA, RSET, QUIT, ...) with code and text instead of going on; for DATA the answer
// comes after the message, as servers refuse a message once they have read
// it. "CONNECT" answers the next connection's greeting and closes it, as a
// busy server does with 421. Calls queue up.
func (s *SMTP) FailNext(verb string, code int, text string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	verb = strings.ToUpper(verb)
	s.fail[verb] = append(s.fail[verb], smtpReply{code, text})
}

// RefuseMessage makes the server refuse, once, the next message for which
// match is true, answering its DATA with code and text, as a server that
// refuses one message (a filter, a full queue) does. Calls queue up, each
// taken by the first message it matches.
func (s *SMTP) RefuseMessage(code int, text string, match func(SMTPMessage) bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refuse = append(s.refuse, smtpRefusal{smtpReply{code, text}, match})
}

// takeRefusal returns the answer to m of the first refusal it matches, and
// drops that refusal.
func (s *SMTP) takeRefusal(m SMTPMessage) (smtpReply, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, r := range s.refuse {
		if r.match(m) {
			s.refuse = append(s.refuse[:i], s.refuse[i+1:]...)
			return r.smtpReply, true
		}
	}
	return smtpReply{}, false
}

// Messages returns the messages accepted so far, in order.
func (s *SMTP) Messages() []SMTPMessage { return cloned(&s.mu, &s.messages) }

// Sessions returns the sessions so far, in the order they began.
func (s *SMTP) Sessions() []SMTPSession {
	return copied(&s.mu, &s.sessions, func(ss *SMTPSession) { ss.Commands = append([]string(nil), ss.Commands...) })
}

func (s *SMTP) takeFailure(verb string) (smtpReply, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.fail[verb]
	if len(q) == 0 {
		return smtpReply{}, false
	}
	s.fail[verb] = q[1:]
	return q[0], true
}

func (s *SMTP) accept() {
	defer s.wg.Done()
	for {
		conn, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer conn.Close()
			s.serve(conn)
		}()
	}
}

// smtpConn is the state of one session (RFC 5321 §4.1.4 and RFC 3207 §4.2:
// STARTTLS forgets the greeting and the authentication).
type smtpConn struct {
	s      *SMTP
	conn   net.Conn
	tp     *textproto.Conn
	sess   *SMTPSession
	helo   bool
	authed string
	inMail bool
	from   string
	rcpts  []string
}

func (s *SMTP) serve(conn net.Conn) {
	c := &smtpConn{s: s, conn: conn, sess: &SMTPSession{}}
	s.mu.Lock()
	s.sessions = append(s.sessions, c.sess)
	s.mu.Unlock()
	if s.cfg.ImplicitTLS {
		tc := tls.Server(conn, s.cfg.TLS)
		_ = tc.SetDeadline(time.Now().Add(smtpIdle))
		if err := tc.Handshake(); err != nil {
			return
		}
		c.conn = tc
		c.setTLS()
	}
	c.tp = textproto.NewConn(c.conn)
	if f, ok := s.takeFailure("CONNECT"); ok {
		c.reply(f.code, f.text)
		return
	}
	c.reply(220, "notifytest ESMTP ready")
	for {
		_ = c.conn.SetDeadline(time.Now().Add(smtpIdle))
		line, err := c.tp.ReadLine()
		if err != nil {
			return
		}
		verb, arg, _ := strings.Cut(line, " ")
		verb = strings.ToUpper(verb)
		s.mu.Lock()
		c.sess.Commands = append(c.sess.Commands, verb)
		s.mu.Unlock()
		if !c.command(verb, strings.TrimSpace(arg)) {
			return
		}
	}
}

func (c *smtpConn) setTLS() {
	c.s.mu.Lock()
	c.sess.TLS = true
	c.s.mu.Unlock()
}

func (c *smtpConn) reply(code int, text string) {
	_ = c.tp.PrintfLine("%d %s", code, text)
}

func (c *smtpConn) reset() {
	c.inMail, c.from, c.rcpts = false, "", nil
}

// command answers one command; false ends the session.
func (c *smtpConn) command(verb, arg string) bool {
	// DATA's scripted answer comes after the message (see data).
	if verb != "DATA" {
		if f, ok := c.s.takeFailure(verb); ok {
			c.reply(f.code, f.text)
			return f.code != 421 // 421 closes the session (RFC 5321 §3.8)
		}
	}
	switch verb {
	case "EHLO", "HELO":
		if arg == "" {
			c.reply(501, "5.5.4 Syntax: "+verb+" hostname")
			return true
		}
		c.helo = true
		c.reset()
		if verb == "HELO" {
			c.reply(250, "notifytest")
			return true
		}
		lines := []string{"notifytest greets " + arg, "8BITMIME", "ENHANCEDSTATUSCODES", "SIZE " + strconv.Itoa(smtpMaxSize)}
		if c.s.cfg.TLS != nil && !c.sess.TLS {
			lines = append(lines, "STARTTLS")
		}
		if c.s.cfg.Username != "" {
			lines = append(lines, "AUTH PLAIN LOGIN")
		}
		for i, l := range lines {
			sep := "-"
			if i == len(lines)-1 {
				sep = " "
			}
			_ = c.tp.PrintfLine("250%s%s", sep, l)
		}
	case "STARTTLS":
		switch {
		case c.s.cfg.TLS == nil:
			c.reply(502, "5.5.1 Error: command not implemented")
		case c.sess.TLS:
			c.reply(554, "5.5.1 Error: TLS already active")
		default:
			c.reply(220, "2.0.0 Ready to start TLS")
			tc := tls.Server(c.conn, c.s.cfg.TLS)
			_ = tc.SetDeadline(time.Now().Add(smtpIdle))
			if err := tc.Handshake(); err != nil {
				return false
			}
			c.conn = tc
			c.tp = textproto.NewConn(tc)
			c.setTLS()
			c.helo, c.authed = false, ""
			c.reset()
		}
	case "AUTH":
		c.auth(arg)
	case "MAIL":
		c.mail(arg)
	case "RCPT":
		c.rcpt(arg)
	case "DATA":
		return c.data()
	case "RSET":
		c.reset()
		c.reply(250, "2.0.0 Ok")
	case "NOOP":
		c.reply(250, "2.0.0 Ok")
	case "VRFY":
		c.reply(252, "2.0.0 Cannot VRFY user")
	case "QUIT":
		c.s.mu.Lock()
		c.sess.Quit = true
		c.s.mu.Unlock()
		c.reply(221, "2.0.0 Bye")
		return false
	default:
		c.reply(502, "5.5.2 Error: command not recognized")
	}
	return true
}

func (c *smtpConn) auth(arg string) {
	mech, initial, _ := strings.Cut(arg, " ")
	switch {
	case c.s.cfg.Username == "":
		c.reply(503, "5.5.1 Error: authentication not enabled")
		return
	case !c.helo:
		c.reply(503, "5.5.1 Error: send EHLO first")
		return
	case c.authed != "":
		c.reply(503, "5.5.1 Error: already authenticated")
		return
	case c.inMail:
		c.reply(503, "5.5.1 Error: MAIL transaction in progress")
		return
	case c.s.cfg.RequireTLS && !c.sess.TLS:
		c.reply(538, "5.7.11 Encryption required for requested authentication mechanism")
		return
	}
	var user, pass string
	switch strings.ToUpper(mech) {
	case "PLAIN":
		resp, ok := c.challenge(initial, "")
		if !ok {
			return
		}
		parts := strings.Split(string(resp), "\x00")
		if len(parts) != 3 {
			c.reply(501, "5.5.2 Error: malformed PLAIN response")
			return
		}
		user, pass = parts[1], parts[2]
	case "LOGIN":
		u, ok := c.challenge(initial, "Username:")
		if !ok {
			return
		}
		p, ok := c.challenge("", "Password:")
		if !ok {
			return
		}
		user, pass = string(u), string(p)
	default:
		c.reply(504, "5.5.4 Unrecognized authentication type")
		return
	}
	if user != c.s.cfg.Username || pass != c.s.cfg.Password {
		c.reply(535, "5.7.8 Authentication credentials invalid")
		return
	}
	c.authed = user
	c.s.mu.Lock()
	c.sess.User = user
	c.s.mu.Unlock()
	c.reply(235, "2.7.0 Authentication successful")
}

// challenge returns the decoded initial response, or sends the base64 of
// prompt with 334 and reads the client's answer. It answers a cancel or an
// undecodable answer itself and returns false.
func (c *smtpConn) challenge(initial, prompt string) ([]byte, bool) {
	line := initial
	if line == "" {
		c.reply(334, base64.StdEncoding.EncodeToString([]byte(prompt)))
		var err error
		if line, err = c.tp.ReadLine(); err != nil {
			return nil, false
		}
	}
	if line == "*" {
		c.reply(501, "5.7.0 Authentication aborted")
		return nil, false
	}
	if line == "=" {
		return nil, true
	}
	b, err := base64.StdEncoding.DecodeString(line)
	if err != nil {
		c.reply(501, "5.5.2 Error: cannot decode response")
		return nil, false
	}
	return b, true
}

// path reads "FROM:<addr> params" or "TO:<addr> params".
func path(arg, prefix string) (addr string, params []string, ok bool) {
	if len(arg) < len(prefix) || !strings.EqualFold(arg[:len(prefix)], prefix) {
		return "", nil, false
	}
	rest := strings.TrimSpace(arg[len(prefix):])
	if !strings.HasPrefix(rest, "<") {
		return "", nil, false
	}
	end := strings.IndexByte(rest, '>')
	if end < 0 {
		return "", nil, false
	}
	return rest[1:end], strings.Fields(rest[end+1:]), true
}

func (c *smtpConn) mail(arg string) {
	switch {
	case !c.helo:
		c.reply(503, "5.5.1 Error: send HELO/EHLO first")
		return
	case c.s.cfg.RequireTLS && !c.sess.TLS:
		c.reply(530, "5.7.0 Must issue a STARTTLS command first")
		return
	case c.s.cfg.Username != "" && c.authed == "":
		c.reply(530, "5.7.0 Authentication required")
		return
	case c.inMail:
		c.reply(503, "5.5.1 Error: nested MAIL command")
		return
	}
	from, params, ok := path(arg, "FROM:")
	if !ok {
		c.reply(501, "5.5.4 Syntax: MAIL FROM:<address>")
		return
	}
	for _, p := range params {
		if k, v, _ := strings.Cut(p, "="); strings.EqualFold(k, "SIZE") {
			if n, err := strconv.Atoi(v); err == nil && n > smtpMaxSize {
				c.reply(552, "5.3.4 Message size exceeds fixed limit")
				return
			}
		}
	}
	c.inMail, c.from = true, from
	c.reply(250, "2.1.0 Ok")
}

func (c *smtpConn) rcpt(arg string) {
	if !c.inMail {
		c.reply(503, "5.5.1 Error: need MAIL command")
		return
	}
	to, _, ok := path(arg, "TO:")
	if !ok || to == "" {
		c.reply(501, "5.5.4 Syntax: RCPT TO:<address>")
		return
	}
	if len(c.rcpts) >= smtpMaxRecipients {
		c.reply(452, "4.5.3 Error: too many recipients")
		return
	}
	c.rcpts = append(c.rcpts, to)
	c.reply(250, "2.1.5 Ok")
}

func (c *smtpConn) data() bool {
	if !c.inMail || len(c.rcpts) == 0 {
		c.reply(554, "5.5.1 Error: no valid recipients")
		return true
	}
	c.reply(354, "End data with <CR><LF>.<CR><LF>")
	data, err := readData(c.tp.R)
	if err != nil && !errors.Is(err, errTooBig) {
		return false
	}
	from, rcpts := c.from, c.rcpts
	c.reset()
	if errors.Is(err, errTooBig) {
		c.reply(552, "5.3.4 Message size exceeds fixed limit")
		return true
	}
	if f, ok := c.s.takeFailure("DATA"); ok {
		c.reply(f.code, f.text)
		return f.code != 421
	}
	m := SMTPMessage{From: from, To: rcpts, Data: data, TLS: c.sess.TLS, User: c.authed}
	if f, ok := c.s.takeRefusal(m); ok {
		c.reply(f.code, f.text)
		return f.code != 421
	}
	c.s.mu.Lock()
	c.s.messages = append(c.s.messages, m)
	c.s.queued++
	n := c.s.queued
	c.s.mu.Unlock()
	c.reply(250, fmt.Sprintf("2.0.0 Ok: queued as NT%04d", n))
	return true
}

var errTooBig = errors.New("message too big")

// readData reads a message up to the line holding a lone dot and removes
// the dot a client doubles at the start of a line (RFC 5321 §4.5.2). Lines
// keep their CRLF.
func readData(r *bufio.Reader) ([]byte, error) {
	var out bytes.Buffer
	var tooBig bool
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return nil, err
		}
		if line == ".\r\n" || line == ".\n" {
			break
		}
		line = strings.TrimPrefix(line, ".")
		if out.Len()+len(line) > smtpMaxSize {
			tooBig = true
			continue
		}
		out.WriteString(line)
	}
	if tooBig {
		return nil, errTooBig
	}
	return out.Bytes(), nil
}

// Parse parses the message.
func (m SMTPMessage) Parse() (*mail.Message, error) {
	return mail.ReadMessage(bytes.NewReader(m.Data))
}

// Header returns the first value of a header of the message, with encoded
// words (RFC 2047) decoded; "" when absent or unparsable.
func (m SMTPMessage) Header(name string) string {
	msg, err := m.Parse()
	if err != nil {
		return ""
	}
	v := msg.Header.Get(name)
	if dec, err := new(mime.WordDecoder).DecodeHeader(v); err == nil {
		return dec
	}
	return v
}

// Part returns the decoded text of the first part of the message whose
// media type is mediaType (such as text/plain), looking into nested
// multiparts and undoing quoted-printable and base64.
func (m SMTPMessage) Part(mediaType string) (string, error) {
	msg, err := m.Parse()
	if err != nil {
		return "", err
	}
	b, ok, err := findPart(textproto.MIMEHeader(msg.Header), msg.Body, mediaType)
	if err != nil {
		return "", err
	}
	if !ok {
		return "", fmt.Errorf("no %s part", mediaType)
	}
	return string(b), nil
}

func findPart(h textproto.MIMEHeader, body io.Reader, want string) ([]byte, bool, error) {
	mt, params, err := mime.ParseMediaType(h.Get("Content-Type"))
	if err != nil {
		mt = "text/plain"
	}
	if strings.HasPrefix(mt, "multipart/") {
		mr := multipart.NewReader(body, params["boundary"])
		for {
			p, err := mr.NextRawPart()
			if errors.Is(err, io.EOF) {
				return nil, false, nil
			}
			if err != nil {
				return nil, false, err
			}
			if b, ok, err := findPart(p.Header, p, want); ok || err != nil {
				return b, ok, err
			}
		}
	}
	if mt != want {
		return nil, false, nil
	}
	switch strings.ToLower(h.Get("Content-Transfer-Encoding")) {
	case "quoted-printable":
		body = quotedprintable.NewReader(body)
	case "base64":
		body = base64.NewDecoder(base64.StdEncoding, body)
	}
	b, err := io.ReadAll(body)
	return b, err == nil, err
}
