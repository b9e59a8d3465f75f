package service

import (
	"encoding/json"
	"log/slog"
	"net/http"

	"github.com/relay-energy/relay/internal/poller"
)

// stampsAPI serves GET /stamps: the devices' stamp offsets the tenant's
// poller learnt (poller.StampSummary as JSON), which relay check --online
// shows. Requests need RELAY_ADMIN_TOKEN (adminGuard): the answer names
// devices.
type stampsAPI struct {
	poll  *poller.Poller
	token string
	log   *slog.Logger
}

func (a *stampsAPI) register(o handlers) {
	o.Handle("GET /stamps", adminHandler(a.token, a.log, "stamps request failed", func(w http.ResponseWriter, _ *http.Request) error {
		w.Header().Set("Content-Type", "application/json")
		return json.NewEncoder(w).Encode(a.poll.StampOffsets())
	}))
}
