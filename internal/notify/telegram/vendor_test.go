package telegram_test

import (
	"strings"
	"testing"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify/sinktest"
	"github.com/relay-energy/relay/internal/notify/sinktype"
	"github.com/relay-energy/relay/internal/notify/telegram"
)

// TestDefaultAPIURLIsTheBotAPI: without api_url a sink calls the Bot API in
// the form Telegram documents ("Making requests"): "All queries to the
// Telegram Bot API must be served over HTTPS and need to be presented in this
// form:
//
//	https://api.telegram.org/bot<token>/METHOD_NAME"
func TestDefaultAPIURLIsTheBotAPI(t *testing.T) {
	const documented = "https://api.telegram.org/bot<token>/METHOD_NAME"
	const tok = "123456:ABC-DEF1234ghIkl-zyx57W2v1u123ew11"
	rec, client := sinktest.NewRecorder(`{"ok":true,"result":{"message_id":42}}`)
	clk := clock.NewFake(sinktest.Epoch)
	s := sinktest.Build(t, telegram.Type, "oncall", "token_env: TG_TOKEN\nchat_id: '-1001234567890'\n",
		map[string]string{"TG_TOKEN": tok}, sinktype.Deps{Clock: clk, HTTP: client})
	if _, err := sinktest.SendEvent(t, clk, s, sinktest.Event("a1", 0, event.Start), nil); err != nil {
		t.Fatal(err)
	}
	want := strings.NewReplacer("<token>", tok, "METHOD_NAME", "sendMessage").Replace(documented)
	if got := rec.First(t); got != want {
		t.Fatalf("the start went to %s, want %s", got, want)
	}
}
