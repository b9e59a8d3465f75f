package console

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"sync"
	"time"
)

// Role is what a session may do: look (viewer) or also act (admin).
type Role string

// The roles of a session.
const (
	Viewer Role = "viewer"
	Admin  Role = "admin"
)

// SessionLifetime is how long a login lasts.
const SessionLifetime = 12 * time.Hour

// session is one login: its role, the CSRF token its forms carry, when it
// ends, and a message to show once on the next page.
type session struct {
	role Role
	// name is who logged in, as they said, for the alarms' history.
	name    string
	csrf    string
	expires time.Time
	flash   string
}

// Sessions are the console's logins, kept in memory only: a restart logs
// everyone out. One set serves every tenant's console of the process.
type Sessions struct {
	now func() time.Time

	mu   sync.Mutex
	byID map[string]*session
	// once are the one-time login codes not used yet, by the SHA-256 of
	// the code: a lookup reveals nothing of a code by its timing.
	once map[[sha256.Size]byte]oneTime
	// live are the sessions' open live-update streams (streams.go).
	live streams
}

// OneTimeLifetime is how long a one-time login link (Sessions.OneTime)
// stays valid when unused.
const OneTimeLifetime = 10 * time.Minute

// oneTime is a one-time login code's session to open: its role and name,
// and when the code expires.
type oneTime struct {
	role    Role
	name    string
	expires time.Time
}

// NewSessions returns an empty set of sessions that tells the time with now
// (nil: the wall clock).
func NewSessions(now func() time.Time) *Sessions {
	if now == nil {
		now = time.Now
	}
	return &Sessions{now: now, byID: map[string]*session{}, once: map[[sha256.Size]byte]oneTime{}}
}

// open starts a session for role, of the person name, and returns its id and expiry; expired
// sessions are forgotten on the way.
func (s *Sessions) open(role Role, name string) (string, time.Time) {
	id, csrf := randomToken(), randomToken()
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, v := range s.byID {
		if !now.Before(v.expires) {
			delete(s.byID, k)
		}
	}
	exp := now.Add(SessionLifetime)
	s.byID[id] = &session{role: role, name: name, csrf: csrf, expires: exp}
	return id, exp
}

// get returns a copy of the live session id, and false when there is none
// or it expired.
func (s *Sessions) get(id string) (session, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.byID[id]
	if !ok {
		return session{}, false
	}
	if !s.now().Before(v.expires) {
		delete(s.byID, id)
		s.live.end(id)
		return session{}, false
	}
	return *v, true
}

// takeFlash returns the message of session id to show once, and clears it.
func (s *Sessions) takeFlash(id string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.byID[id]
	if !ok {
		return ""
	}
	f := v.flash
	v.flash = ""
	return f
}

// setFlash keeps msg for the next page of session id.
func (s *Sessions) setFlash(id, msg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if v, ok := s.byID[id]; ok {
		v.flash = msg
	}
}

// close ends session id, and its open live-update streams at once, and
// reports whether id was a session of this process (another relay's
// cookie, on another port of the host, is not).
func (s *Sessions) close(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.byID[id]
	delete(s.byID, id)
	s.live.end(id)
	return ok
}

// OneTime returns a code that opens a session for role, of the person
// name, once, within OneTimeLifetime: the console's login link
// <console>/login/once/<code> (the demo prints one). The code is a secret
// like a token: it is kept only as its hash, and never logged.
func (s *Sessions) OneTime(role Role, name string) string {
	code := randomToken()
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, v := range s.once {
		if !now.Before(v.expires) {
			delete(s.once, k)
		}
	}
	s.once[sha256.Sum256([]byte(code))] = oneTime{role: role, name: name, expires: now.Add(OneTimeLifetime)}
	return code
}

// redeem uses up code and returns the role and name of the session it
// opens; false when the code was never issued, is used already or expired.
func (s *Sessions) redeem(code string) (Role, string, bool) {
	key := sha256.Sum256([]byte(code))
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.once[key]
	delete(s.once, key)
	if !ok || !s.now().Before(v.expires) {
		return "", "", false
	}
	return v.role, v.name, true
}

// randomToken returns 32 random bytes in URL-safe base64.
func randomToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return base64.RawURLEncoding.EncodeToString(b)
}
