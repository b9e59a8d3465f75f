package sim

import (
	"crypto/rand"
	"crypto/subtle"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// tokens holds the access tokens issued and when each expires.
type tokens struct {
	ttl time.Duration

	mu     sync.Mutex
	expiry map[string]time.Time
	// uses holds when each token was first and last accepted: a client
	// logs in once and then uses its token, so two tokens used over
	// overlapping spans are two clients polling the tenant at once.
	uses map[string]*TokenUse
}

// TokenUse is when one token was first and last accepted.
type TokenUse struct {
	First, Last time.Time
	// Requests counts the requests it was accepted for.
	Requests int
}

func newTokens(ttl time.Duration) *tokens {
	return &tokens{ttl: ttl, expiry: map[string]time.Time{}, uses: map[string]*TokenUse{}}
}

// issue makes a new token valid for ttl from now, and forgets tokens that
// expired more than ttl ago.
func (t *tokens) issue(now time.Time) string {
	tok := rand.Text()
	t.mu.Lock()
	defer t.mu.Unlock()
	for k, exp := range t.expiry {
		if now.Sub(exp) > t.ttl {
			delete(t.expiry, k)
		}
	}
	t.expiry[tok] = now.Add(t.ttl)
	return tok
}

// bearerToken returns the token of r's Authorization header: the token
// alone or after "Bearer ".
func bearerToken(r *http.Request) string {
	tok := strings.TrimSpace(r.Header.Get("Authorization"))
	if len(tok) > 7 && strings.EqualFold(tok[:7], "bearer ") {
		tok = strings.TrimSpace(tok[7:])
	}
	return tok
}

// issued reports whether tok was issued here, expired or not.
func (t *tokens) issued(tok string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, ok := t.expiry[tok]
	return ok
}

// check validates the Authorization header of r: the token alone or after
// "Bearer ".
func (t *tokens) check(r *http.Request, now time.Time) *apiError {
	tok := bearerToken(r)
	if tok == "" {
		return &apiError{CodeTokenInvalid, descTokenInvalid}
	}
	t.mu.Lock()
	exp, ok := t.expiry[tok]
	t.mu.Unlock()
	switch {
	case !ok:
		return &apiError{CodeTokenInvalid, descTokenInvalid}
	case !now.Before(exp):
		return &apiError{CodeTokenExpired, descTokenExpired}
	}
	t.mu.Lock()
	u := t.uses[tok]
	if u == nil {
		u = &TokenUse{First: now}
		t.uses[tok] = u
	}
	u.Last = now
	u.Requests++
	t.mu.Unlock()
	return nil
}

// list returns every token's use, by first use.
func (t *tokens) list() []TokenUse {
	t.mu.Lock()
	uses := make([]TokenUse, 0, len(t.uses))
	for _, u := range t.uses {
		uses = append(uses, *u)
	}
	t.mu.Unlock()
	slices.SortFunc(uses, func(a, b TokenUse) int { return a.First.Compare(b.First) })
	return uses
}

// overlaps returns the pairs of tokens used over overlapping spans, each
// pair once, earlier first.
func (t *tokens) overlaps() [][2]TokenUse {
	uses := t.list()
	var out [][2]TokenUse
	for i := range uses {
		for j := i + 1; j < len(uses) && !uses[j].First.After(uses[i].Last); j++ {
			out = append(out, [2]TokenUse{uses[i], uses[j]})
		}
	}
	return out
}

// expireAll makes every issued token expired as of now.
func (t *tokens) expireAll(now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k := range t.expiry {
		t.expiry[k] = now
	}
}

// credentialsMatch compares in constant time, so that the simulator does not
// teach a client to rely on timing.
func credentialsMatch(gotID, gotSecret, wantID, wantSecret string) bool {
	idOK := subtle.ConstantTimeCompare([]byte(gotID), []byte(wantID)) == 1
	secretOK := subtle.ConstantTimeCompare([]byte(gotSecret), []byte(wantSecret)) == 1
	return idOK && secretOK
}
