package service

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/store"
)

// TestDeadLetterShowReadsOneLetter: GET /deadletters/{sink}/{seq} answers
// the dead letter with its event, and allocates about as much with 300
// dead letters at the sink as with 20: it reads that one, not every one of
// its sink with their bodies.
func TestDeadLetterShowReadsOneLetter(t *testing.T) {
	const token = "admin-token-0123456789abcdef"
	show := func(n int) float64 {
		st, err := store.Open(filepath.Join(t.TempDir(), "relay.db"), store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		now := time.Now().UTC()
		var as []event.Alarm
		for i := range n {
			id := fmt.Sprintf("A%04d", i)
			as = append(as, event.Alarm{OriginID: id, Status: event.StatusOngoing, OccurredAt: now.Add(-time.Hour),
				Raw: []byte(fmt.Sprintf(`{"originId":%q,"pad":"%0512d"}`, id, i))})
		}
		if _, err := st.Apply(context.Background(), store.Batch{Observed: as}, func(*event.Event) []string { return []string{"hook"} }); err != nil {
			t.Fatal(err)
		}
		es, err := st.Pending("hook", n)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range es {
			if err := st.DeadLetter(e, "HTTP 400"); err != nil {
				t.Fatal(err)
			}
		}
		mux := http.NewServeMux()
		(&deadLetterAPI{store: st, token: token, clock: clock.Real(), log: slog.New(slog.DiscardHandler)}).register(mux)
		want := es[n/2]
		path := fmt.Sprintf("/deadletters/hook/%d", want.Seq)
		get := func() *httptest.ResponseRecorder {
			req := httptest.NewRequest(http.MethodGet, path, nil)
			req.Header.Set("Authorization", "Bearer "+token)
			rec := httptest.NewRecorder()
			mux.ServeHTTP(rec, req)
			return rec
		}
		rec := get()
		var got DeadLettersAnswer
		if err := json.Unmarshal(rec.Body.Bytes(), &got); rec.Code != http.StatusOK || err != nil || got.Count != 1 ||
			got.DeadLetters[0].EventID != want.EventID || string(got.DeadLetters[0].Event) != string(want.Body) {
			t.Fatalf("GET %s: %d %s, want %s with its event", path, rec.Code, rec.Body, want.EventID)
		}
		path = fmt.Sprintf("/deadletters/hook/%d", es[n-1].Seq+100)
		if rec := get(); rec.Code != http.StatusNotFound {
			t.Fatalf("GET %s, a number no dead letter has: %d, want 404", path, rec.Code)
		}
		path = fmt.Sprintf("/deadletters/hook/%d", want.Seq)
		return testing.AllocsPerRun(10, func() { get() })
	}
	few, many := show(20), show(300)
	if many > few+20 {
		t.Fatalf("showing one dead letter made %v allocations with 300 at the sink, %v with 20: want about as many", many, few)
	}
}
