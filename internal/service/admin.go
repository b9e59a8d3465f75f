package service

import (
	"crypto/subtle"
	"errors"
	"log/slog"
	"net/http"
	"strings"
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
			w.Header().Set("WWW-Authenticate", `Bearer realm="relay"`)
			http.Error(w, "wrong or missing token: send Authorization: Bearer <RELAY_ADMIN_TOKEN>", http.StatusUnauthorized)
			return
		}
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
