package service

import (
	"crypto/subtle"
	"net/http"
	"strings"
)

// adminGuard admits to h, the administration endpoints of the ops listener
// (dead letters, silences), only the requests that carry the header
// "Authorization: Bearer <RELAY_ADMIN_TOKEN>", compared in constant time.
// Without a token configured every request is refused with 403: the
// endpoints are off.
func adminGuard(token string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if token == "" {
			http.Error(w, "administration through the ops listener (dead letters, silences) is off: set RELAY_ADMIN_TOKEN in relay's environment",
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
