package console

import (
	"fmt"
	"net/http"

	"github.com/relay-energy/relay/internal/guard"
)

// loginOnce answers a one-time login link (Sessions.OneTime): a code not
// used yet, and within its lifetime, opens its session as a login with a
// token does; any other gets the login form saying so. The code is never
// logged.
func (c *Console) loginOnce(w http.ResponseWriter, r *http.Request) {
	attempt, wait, ok := c.o.Throttle.Allow(c.f.proxies.Client(r), "console")
	if !ok {
		guard.Refuse(w, wait)
		return
	}
	role, name, ok := c.o.Sessions.redeem(r.PathValue("code"))
	if ok && role == Admin && c.o.AdminToken == "" {
		ok = false // the admin token was turned off since the link was made
	}
	if !ok {
		attempt.Wrong()
		renderStatus(w, http.StatusUnauthorized, "login", map[string]any{"Base": base(r),
			"Error": fmt.Sprintf("this one-time login link was used already or has expired (it works once, within %d minutes): "+
				"log in with a token", int(OneTimeLifetime.Minutes()))})
		return
	}
	attempt.Right()
	c.o.Logger.Info("console: logged in with a one-time link", "role", role, "name", name)
	c.startSession(w, r, role, name)
}
