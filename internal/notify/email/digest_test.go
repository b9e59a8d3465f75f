package email_test

import (
	"strings"
	"testing"

	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/notify/sinktest"
)

// TestADigestIsOneMailAndItsListsReplyToIt: the digest's mail lists its
// alarms; the alarms that join later and those that end come in replies to
// it (In-Reply-To, References, the subject after "Re: "), whose Message-ID
// is the same when a reply is sent again, so that clients show it once;
// upstream names are escaped in the HTML.
func TestADigestIsOneMailAndItsListsReplyToIt(t *testing.T) {
	clk, srv, s := mailer(t, "")
	d := s.(notify.Digester)
	dg := sinktest.DigestOf("mail", 30, 3)
	mem := sinktest.ShowDigest(t, clk, d, dg)
	sinktest.ListDigests(t, clk, d, dg, mem, dg.Items[:25])
	if n := len(srv.Messages()); n != 1 {
		t.Fatalf("%d mails after listing what the digest's mail lists, want 1", n)
	}
	dg.Items = append(dg.Items, sinktest.DigestItem(30, 3))
	ended := sinktest.EndDigestItems(dg, 2)
	for range 2 { // the second time, as after an answer that was lost
		if _, err := sinktest.ListDigest(t, clk, d, dg, mem, append(ended, dg.Items[30])); err != nil {
			t.Fatalf("ListDigest: %v", err)
		}
	}
	ms := srv.Messages()
	if len(ms) != 3 {
		t.Fatalf("%d mails, want the digest and a reply sent twice", len(ms))
	}
	digest, reply, again := ms[0], ms[1], ms[2]
	id := digest.Header("Message-ID")
	if reply.Header("In-Reply-To") != id || reply.Header("References") != id || reply.Header("Subject") != "Re: "+digest.Header("Subject") {
		t.Errorf("the reply is to %q (references %q), subject %q; want the digest's %q, subject %q",
			reply.Header("In-Reply-To"), reply.Header("References"), reply.Header("Subject"), id, "Re: "+digest.Header("Subject"))
	}
	if reply.Header("Message-ID") != again.Header("Message-ID") || reply.Header("Message-ID") == id {
		t.Errorf("a reply sent twice has Message-IDs %q and %q, want one of its own", reply.Header("Message-ID"), again.Header("Message-ID"))
	}
	plain, _ := digest.Part("text/plain")
	for _, it := range dg.Items[:30] {
		if !strings.Contains(plain, it.DeviceName) {
			t.Errorf("the digest's mail does not list %s", it.DeviceName)
		}
	}
	text, _ := reply.Part("text/plain")
	if !strings.Contains(text, "31 alarms since 08:00 UTC, 30 ongoing") || !strings.Contains(text, dg.Items[2].DeviceName) || !strings.Contains(text, dg.Items[30].DeviceName) {
		t.Errorf("the reply does not hold the counts, the end and the late alarm:\n%s", text)
	}
	html, _ := digest.Part("text/html")
	if strings.Contains(html, "<phase A>") || !strings.Contains(html, "&lt;phase A&gt;") {
		t.Errorf("the HTML does not escape upstream names")
	}
}
