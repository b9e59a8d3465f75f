package sinktest

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/notify/sinktype"
)

// DeviceName is the device of alarm i of DigestOf: unique, and plain text
// in every channel's markup, so that a test can find it as sent.
func DeviceName(i int) string { return fmt.Sprintf("Inverter %03d", i) }

// DigestOf returns a storm digest opened at Epoch with n alarms over
// stations stations and the four levels, alarm i on device DeviceName(i)
// with the description of Event, which every markup must escape.
func DigestOf(id string, n, stations int) *notify.Digest {
	dg := &notify.Digest{ID: id, Opened: Epoch, Until: Epoch.Add(10 * time.Minute), Threshold: 10, Window: 10 * time.Minute}
	for i := range n {
		dg.Items = append(dg.Items, DigestItem(i, stations))
	}
	return dg
}

// DigestItem is alarm i of DigestOf, on one of stations stations.
func DigestItem(i, stations int) notify.DigestItem {
	st := i % max(stations, 1)
	return notify.DigestItem{
		OriginID: fmt.Sprintf("dg%04d", i), Level: i % 4, StationID: fmt.Sprint(5001 + st),
		StationName: fmt.Sprintf("North Park_%d [PV] <%c> & Co", st, 'A'+st), DeviceSN: fmt.Sprintf("SN%04d", i),
		DeviceName: DeviceName(i), EventCode: "E1023", EventDesc: "Grid overvoltage <phase A> & *B*",
		OccurredAt: Epoch.Add(time.Duration(i) * time.Second),
	}
}

// EndDigestItems ends the alarms of dg at the indexes given, at Epoch plus
// 5 minutes, and returns them as they now stand.
func EndDigestItems(dg *notify.Digest, idx ...int) []notify.DigestItem {
	var out []notify.DigestItem
	for _, i := range idx {
		dg.Items[i].Outcome, dg.Items[i].RecoveredAt = event.End, Epoch.Add(5*time.Minute)
		out = append(out, dg.Items[i])
	}
	return out
}

// PostDigest calls d.PostDigest as Call does.
func PostDigest(t testing.TB, clk *clock.Fake, d notify.Digester, dg *notify.Digest) (map[string]string, notify.Result, error) {
	t.Helper()
	var mem map[string]string
	res, err := Call(t, clk, "PostDigest of "+dg.ID, func(ctx context.Context) (notify.Result, error) {
		m, res, err := d.PostDigest(ctx, dg)
		mem = m
		return res, err
	})
	return mem, res, err
}

// UpdateDigest calls d.UpdateDigest as Call does.
func UpdateDigest(t testing.TB, clk *clock.Fake, d notify.Digester, dg *notify.Digest, mem map[string]string) (notify.Result, error) {
	t.Helper()
	return Call(t, clk, "UpdateDigest of "+dg.ID, func(ctx context.Context) (notify.Result, error) { return d.UpdateDigest(ctx, dg, mem) })
}

// ListDigest calls d.ListDigest as Call does.
func ListDigest(t testing.TB, clk *clock.Fake, d notify.Digester, dg *notify.Digest, mem map[string]string, items []notify.DigestItem) (notify.Result, error) {
	t.Helper()
	return Call(t, clk, "ListDigest of "+dg.ID, func(ctx context.Context) (notify.Result, error) { return d.ListDigest(ctx, dg, mem, items) })
}

// ShowDigest posts dg to d as PostDigest does, failing t on an error, and
// returns the digest's memory.
func ShowDigest(t testing.TB, clk *clock.Fake, d notify.Digester, dg *notify.Digest) map[string]string {
	t.Helper()
	mem, _, err := PostDigest(t, clk, d, dg)
	if err != nil {
		t.Fatalf("PostDigest: %v", err)
	}
	return mem
}

// ListDigests lists each of lists, alarms of dg, as ListDigest does, failing
// t on an error.
func ListDigests(t testing.TB, clk *clock.Fake, d notify.Digester, dg *notify.Digest, mem map[string]string, lists ...[]notify.DigestItem) {
	t.Helper()
	for _, items := range lists {
		if _, err := ListDigest(t, clk, d, dg, mem, items); err != nil {
			t.Fatalf("ListDigest of %d alarms from %s: %v", len(items), items[0].OriginID, err)
		}
	}
}

// InLists cuts items into lists of up to sinktype.DigestListSize, as alarm
// management lists a digest's alarms.
func InLists(items []notify.DigestItem) [][]notify.DigestItem {
	var out [][]notify.DigestItem
	for i := 0; i < len(items); i += sinktype.DigestListSize {
		out = append(out, items[i:min(i+sinktype.DigestListSize, len(items))])
	}
	return out
}

// LongNames gives every alarm of dg long as its description and station,
// and "Dnn long" as its device, nn its index, which AssertDevices finds.
func LongNames(dg *notify.Digest, long string) {
	for i := range dg.Items {
		it := &dg.Items[i]
		it.EventDesc, it.StationName, it.DeviceName = long, long, fmt.Sprintf("D%02d %s", i, long)
	}
}

// AssertDevices fails t unless text names the device of every alarm of dg
// that LongNames named, by its start.
func AssertDevices(t testing.TB, dg *notify.Digest, text string) {
	t.Helper()
	for i := range dg.Items {
		if !strings.Contains(text, fmt.Sprintf("D%02d ", i)) {
			t.Errorf("the list does not name device D%02d:\n%s", i, text)
		}
	}
}

// digester returns the sink of f as a Digester that can show digests, and
// skips t when it is none.
func (f *fixture) digester() notify.Digester {
	f.t.Helper()
	d, ok := f.build().(notify.Digester)
	if !ok {
		f.t.Skip("the sink type shows no storm digests")
	}
	if !d.CanDigest() {
		f.t.Skip("the sink, as configured, shows no storm digests")
	}
	return d
}

// all returns every text the fake got, Vendor.All or Received.
func (f *fixture) all() []string {
	if f.vendor.All != nil {
		return f.vendor.All()
	}
	return f.vendor.Received()
}

func digest(t *testing.T, h Harness) {
	t.Run("every alarm and the counts reach the channel", func(t *testing.T) { digestFlow(t, h) })
	t.Run("a daily summary is no storm", func(t *testing.T) { digestSummary(t, h) })
	t.Run("status table", func(t *testing.T) { digestStatus(t, h) })
	t.Run("no secret in errors or logs", func(t *testing.T) { digestLeak(t, h) })
}

// digestFlow shows a digest of 60 alarms as alarm management does: posted,
// listed 25 at a time, then 10 of them ended, the digest updated and the
// ended listed.
func digestFlow(t *testing.T, h Harness) {
	f := newFixture(t, h)
	d := f.digester()
	dg := DigestOf("flow", 60, 3)
	mem := ShowDigest(t, f.clk, d, dg)
	if len(mem) == 0 {
		t.Fatalf("PostDigest left no memory: alarm management would post the digest again")
	}
	ListDigests(t, f.clk, d, dg, mem, InLists(dg.Items)...)
	ended := EndDigestItems(dg, 0, 7, 13, 20, 26, 33, 39, 46, 52, 59)
	if _, err := UpdateDigest(t, f.clk, d, dg, mem); err != nil {
		t.Fatalf("UpdateDigest: %v", err)
	}
	if _, err := ListDigest(t, f.clk, d, dg, mem, ended); err != nil {
		t.Fatalf("ListDigest of the ended: %v", err)
	}
	all := strings.Join(f.all(), "\n")
	for _, it := range dg.Items {
		if !strings.Contains(all, it.DeviceName) {
			t.Errorf("alarm %s (%s) did not reach the channel", it.OriginID, it.DeviceName)
		}
	}
	lines := strings.Split(all, "\n")
	for _, it := range ended {
		if !lineWith(lines, it.DeviceName, "resolved") {
			t.Errorf("the end of alarm %s (%s) did not reach the channel as a line saying it resolved", it.OriginID, it.DeviceName)
		}
	}
	for _, want := range []string{sinktype.DigestTitle(dg), sinktype.DigestLevels(dg)} {
		if !strings.Contains(all, want) {
			t.Errorf("the digest's counts as they stand, %q, did not reach the channel", want)
		}
	}
	if t.Failed() {
		t.Logf("the fake got:\n%s", all)
	}
}

// digestSummary shows the daily summary of stale alarms, a digest with a
// title of its own and no flood threshold, as alarm management sends it:
// posted, then listed. Its title and every alarm reach the channel, and no
// word of it speaks of a storm or of per-alarm messages resuming.
func digestSummary(t *testing.T, h Harness) {
	f := newFixture(t, h)
	d := f.digester()
	dg := DigestOf("daily-20261121T0800Z", 30, 3)
	dg.Title, dg.Threshold, dg.Window = "Daily summary: 30 alarms ongoing for more than 24 h (stale)", 0, 0
	ListDigests(t, f.clk, d, dg, ShowDigest(t, f.clk, d, dg), InLists(dg.Items)...)
	all := strings.Join(f.all(), "\n")
	if !strings.Contains(all, dg.Title) {
		t.Errorf("the summary's title did not reach the channel")
	}
	for _, it := range dg.Items {
		if !strings.Contains(all, it.DeviceName) {
			t.Errorf("alarm %s (%s) did not reach the channel", it.OriginID, it.DeviceName)
		}
	}
	for _, word := range []string{"storm", "resume", "fewer than"} {
		if strings.Contains(strings.ToLower(all), word) {
			t.Errorf("the summary speaks of %q", word)
		}
	}
	if t.Failed() {
		t.Logf("the fake got:\n%s", all)
	}
}

// lineWith reports whether a line of lines holds every word.
func lineWith(lines []string, words ...string) bool {
	for _, l := range lines {
		ok := true
		for _, w := range words {
			ok = ok && strings.Contains(l, w)
		}
		if ok {
			return true
		}
	}
	return false
}

// digestStatus checks each call against the status table's extremes: a 500
// is retried, a 400 is not. A call that makes no request (an update where
// the channel cannot edit) may succeed.
func digestStatus(t *testing.T, h Harness) {
	f := newHTTPFixture(t, h)
	d := f.digester()
	dg := DigestOf("status", 30, 3)
	for _, c := range extremes {
		f.front.set("status", c.code, nil)
		_, res, err := PostDigest(t, f.clk, d, dg)
		if err == nil || res.Retry != c.retry {
			t.Errorf("PostDigest at HTTP %d: retry %v (%v), want an error and retry %v", c.code, res.Retry, err, c.retry)
		}
	}
	f.front.set("pass", 0, nil)
	mem := ShowDigest(t, f.clk, d, dg)
	// Alarms that join later are listed by every channel.
	later := []notify.DigestItem{DigestItem(30, 3), DigestItem(31, 3)}
	dg.Items = append(dg.Items, later...)
	for _, c := range extremes {
		f.front.set("status", c.code, nil)
		res, err := ListDigest(t, f.clk, d, dg, mem, later)
		if err == nil || res.Retry != c.retry {
			t.Errorf("ListDigest at HTTP %d: retry %v (%v), want an error and retry %v", c.code, res.Retry, err, c.retry)
		}
		before := f.front.served()
		res, err = UpdateDigest(t, f.clk, d, dg, mem)
		switch {
		case err == nil && f.front.served() != before:
			t.Errorf("UpdateDigest at HTTP %d: a request was answered %d, yet it succeeded", c.code, c.code)
		case err != nil && res.Retry != c.retry:
			t.Errorf("UpdateDigest at HTTP %d: retry %v (%v), want %v", c.code, res.Retry, err, c.retry)
		}
	}
	f.front.set("pass", 0, nil)
	if _, err := ListDigest(t, f.clk, d, dg, mem, later); err != nil {
		t.Errorf("ListDigest once the vendor answers again: %v", err)
	}
}

// digestLeak checks that no secret reaches the errors of a digest's calls,
// or the log, when the server echoes the whole request back.
func digestLeak(t *testing.T, h Harness) {
	f := newHTTPFixture(t, h)
	d := f.digester()
	dg := DigestOf("leak", 30, 3)
	mem := ShowDigest(t, f.clk, d, dg)
	later := []notify.DigestItem{DigestItem(30, 3)}
	dg.Items = append(dg.Items, later...)
	texts := map[string]string{}
	for _, pad := range []int{0, 150, 185} {
		for _, code := range []int{http.StatusBadRequest, http.StatusInternalServerError} {
			f.front.echo(code, pad)
			if _, _, err := PostDigest(t, f.clk, d, dg); err != nil {
				texts[fmt.Sprintf("PostDigest at HTTP %d after %d bytes", code, pad)] = err.Error()
			} else {
				t.Errorf("PostDigest at HTTP %d echo: no error", code)
			}
			if _, err := ListDigest(t, f.clk, d, dg, mem, later); err != nil {
				texts[fmt.Sprintf("ListDigest at HTTP %d after %d bytes", code, pad)] = err.Error()
			} else {
				t.Errorf("ListDigest at HTTP %d echo: no error", code)
			}
			if _, err := UpdateDigest(t, f.clk, d, dg, mem); err != nil {
				texts[fmt.Sprintf("UpdateDigest at HTTP %d after %d bytes", code, pad)] = err.Error()
			}
		}
	}
	texts["log"] = f.log()
	f.assertNoSecret(t, texts)
}
