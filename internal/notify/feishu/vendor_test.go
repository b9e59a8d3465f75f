package feishu_test

import (
	"testing"

	"github.com/relay-energy/relay/internal/notify/feishu"
)

// TestHookPathIsTheCustomBotsWebhook: the webhook path the sink expects is
// the one Feishu's help centre gives for a custom bot ("You'll then get the
// webhook address for this group in the following format:
//
//	https://open.feishu.cn/open-apis/bot/v2/hook/xxxxxxxxxxxxxxxxx"),
//
// so that a URL copied from the group's settings is taken and its token read.
func TestHookPathIsTheCustomBotsWebhook(t *testing.T) {
	const documented = "https://open.feishu.cn/open-apis/bot/v2/hook/xxxxxxxxxxxxxxxxx"
	token, err := feishu.Token(documented)
	if err != nil || token != "xxxxxxxxxxxxxxxxx" {
		t.Fatalf("Token(%q) = %q, %v; want xxxxxxxxxxxxxxxxx (HookPath %q)", documented, token, err, feishu.HookPath)
	}
}
