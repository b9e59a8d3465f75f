package service

import (
	"crypto/subtle"
	"errors"
	"log/slog"
	"net/http"
	"strings"

	"github.com/relay-energy/relay/internal/guard"
)

// adminGuard admits to h, the administration endpoints of the ops listener
// (dead letters, silences, the report), only the requests that carry the
// header "Authorization: Bearer <RELAY_ADMIN_TOKEN>", compared in constant
// time.
// Without a token configured every request is refused with 403: the
// endpoints are off.
func adminGuard(token string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if token == "" {
			http.Error(w, "administration through the ops listener (dead letters, silences, report) is off: set RELAY_ADMIN_TOKEN in relay's environment",
				http.StatusForbidden)
			return
		}
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || subtle.ConstantTimeCompare([]byte(got), []byte(token)) != 1 {
			guard.AttemptOf(r.Context()).Wrong()
			w.Header().Set("WWW-Authenticate", `Bearer realm="relay"`)
			http.Error(w, "wrong or missing token: send Authorization: Bearer <RELAY_ADMIN_TOKEN>", http.StatusUnauthorized)
			return
		}
		guard.AttemptOf(r.Context()).Right()
		h.ServeHTTP(w, r)
	})
}

// badRequest is an error of an administration handler that is the request's
// fault: adminHandler answers it with 400 and its text.
type badRequest struct{ error }

// adminHandler is adminGuard around h. An error h returns answers 400 when
// it is a badRequest, else 500, logged as failed, with the request's path.
func adminHandler(token string, log *slog.Logger, failed string, h func(http.ResponseWriter, *http.Request) error) http.Handler {
	return adminGuard(token, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := h(w, r); err != nil {
			var bad badRequest
			if errors.As(err, &bad) {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			log.Error(failed, "path", r.URL.Path, "err", err)
			http.Error(w, err.Error(), http.StatusInternalServerError)
		}
	}))
}

// throttleBearer is h, the ops API, behind the throttle t of wrong tokens:
// a client (its address as p says) whose wrong tokens emptied its bucket,
// or while all clients' did (unless its address is known to hold the right
// token), gets 429 with Retry-After whatever token it sends. adminGuard
// says how its token's check went the moment it compares (the Attempt
// rides in the request's context): a wrong or missing token counts, a
// right one gives its tokens back at once and makes the address known, and
// a request that never reaches a check (a path that does not exist,
// administration turned off) gives them back without making it known. The
// Host header is not checked here, unlike the console's: the ops API reads
// no cookie, so a DNS rebinding page has no credential to borrow, and the
// commands call it by any name (a Service, localhost through kubectl, a
// pod's address).
func throttleBearer(t *guard.Throttle, p guard.Proxies, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		attempt, wait, ok := t.Allow(p.Client(r), "api")
		if !ok {
			guard.Refuse(w, wait)
			return
		}
		defer attempt.Release()
		h.ServeHTTP(w, r.WithContext(guard.WithAttempt(r.Context(), attempt)))
	})
}
