package console_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/notify/console"
)

var opened = time.Date(2026, 11, 21, 8, 0, 0, 0, time.UTC)

// stormDigest is a digest of n alarms over two stations, one of whose names
// carries a terminal escape.
func stormDigest(n int) *notify.Digest {
	dg := &notify.Digest{ID: "20261121T080000Z-1", Opened: opened, Until: opened.Add(time.Minute), Threshold: 5, Window: time.Minute}
	for i := range n {
		it := notify.DigestItem{
			OriginID: fmt.Sprint(1000 + i), Level: i % 4, StationID: "5001", StationName: "North Park",
			DeviceSN: fmt.Sprintf("SN%04d", i), EventCode: "E1023", EventDesc: "Grid overvoltage",
			OccurredAt: opened.Add(-time.Duration(n-i) * time.Second),
		}
		if i%3 == 2 {
			it.StationID, it.StationName = "5002", "South\x1b[2J Field"
		}
		dg.Items = append(dg.Items, it)
	}
	return dg
}

// A digest on the console is a block naming the storm, its counts and its
// most urgent alarms, then one indented line per alarm; an end updates the
// counts in one line and lists how the alarm ended. Upstream text is
// escaped.
func TestDigestIsABlockThenALinePerAlarm(t *testing.T) {
	out := &syncBuffer{}
	s, err := console.New("people", out)
	if err != nil {
		t.Fatal(err)
	}
	var _ notify.Digester = s
	if !s.CanDigest() {
		t.Fatal("a console sink cannot digest")
	}
	ctx := context.Background()
	dg := stormDigest(6)
	memory, _, err := s.PostDigest(ctx, dg)
	if err != nil {
		t.Fatal(err)
	}
	// Alarm management posts again while the memory is nil.
	if memory == nil {
		t.Fatal("PostDigest kept no memory of the digest")
	}
	if _, err := s.ListDigest(ctx, dg, memory, dg.Items); err != nil {
		t.Fatal(err)
	}
	dg.Items[0].Outcome, dg.Items[0].RecoveredAt = event.End, opened.Add(3*time.Minute)
	dg.Items[2].Outcome, dg.Items[2].RecoveredAt = event.Invalid, opened.Add(2*time.Minute)
	if _, err := s.UpdateDigest(ctx, dg, memory); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ListDigest(ctx, dg, memory, []notify.DigestItem{dg.Items[0], dg.Items[2]}); err != nil {
		t.Fatal(err)
	}

	want := `2026-11-21T08:00:00Z DIGEST Alarm storm: 6 alarms since 08:00 UTC, 6 ongoing  (digest 20261121T080000Z-1)
  urgent 2 (2 ongoing), severe 2 (2 ongoing), major 1 (1 ongoing), minor 1 (1 ongoing)
  North Park: 2 urgent (2 ongoing)
  North Park: 1 severe (1 ongoing)
  North Park: 1 minor (1 ongoing)
  South\x1b[2J Field: 1 severe (1 ongoing)
  South\x1b[2J Field: 1 major (1 ongoing)
  most urgent, still ongoing:
    URGENT E1023 Grid overvoltage at North Park / SN0000, since 2026-11-21 07:59:54 UTC
    URGENT E1023 Grid overvoltage at North Park / SN0004, since 2026-11-21 07:59:58 UTC
    SEVERE E1023 Grid overvoltage at North Park / SN0001, since 2026-11-21 07:59:55 UTC
    SEVERE E1023 Grid overvoltage at South\x1b[2J Field / SN0005, since 2026-11-21 07:59:59 UTC
    MAJOR E1023 Grid overvoltage at South\x1b[2J Field / SN0002, since 2026-11-21 07:59:56 UTC
  every alarm is listed below. Per-alarm messages resume when fewer than 5 alarms start in 1m.
  - URGENT E1023 Grid overvoltage at North Park / SN0000, since 2026-11-21 07:59:54 UTC
  - SEVERE E1023 Grid overvoltage at North Park / SN0001, since 2026-11-21 07:59:55 UTC
  - MAJOR E1023 Grid overvoltage at South\x1b[2J Field / SN0002, since 2026-11-21 07:59:56 UTC
  - MINOR E1023 Grid overvoltage at North Park / SN0003, since 2026-11-21 07:59:57 UTC
  - URGENT E1023 Grid overvoltage at North Park / SN0004, since 2026-11-21 07:59:58 UTC
  - SEVERE E1023 Grid overvoltage at South\x1b[2J Field / SN0005, since 2026-11-21 07:59:59 UTC
2026-11-21T08:03:00Z DIGEST Alarm storm: 6 alarms since 08:00 UTC, 4 ongoing: urgent 2 (1 ongoing), severe 2 (2 ongoing), major 1 (0 ongoing), minor 1 (1 ongoing)  (digest 20261121T080000Z-1)
  - URGENT E1023 Grid overvoltage at North Park / SN0000, since 2026-11-21 07:59:54 UTC, resolved at 2026-11-21 08:03:00 UTC
  - MAJOR E1023 Grid overvoltage at South\x1b[2J Field / SN0002, since 2026-11-21 07:59:56 UTC, cancelled at 2026-11-21 08:02:00 UTC`
	if got := strings.Join(out.lines(), "\n"); got != want {
		t.Errorf("console output\n got:\n%s\nwant:\n%s", got, want)
	}
}

// A digest that cannot be written is retried, and the error says which sink
// and which digest.
func TestDigestWriteFailureIsRetried(t *testing.T) {
	s, err := console.New("people", failingWriter{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	dg := stormDigest(3)
	calls := map[string]func() (notify.Result, error){
		"PostDigest": func() (notify.Result, error) { _, res, err := s.PostDigest(ctx, dg); return res, err },
		"UpdateDigest": func() (notify.Result, error) {
			return s.UpdateDigest(ctx, dg, map[string]string{"digest": dg.ID})
		},
		"ListDigest": func() (notify.Result, error) {
			return s.ListDigest(ctx, dg, map[string]string{"digest": dg.ID}, dg.Items)
		},
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			res, err := call()
			if err == nil || !res.Retry {
				t.Fatalf("got %+v, %v; want a failure to retry", res, err)
			}
			for _, want := range []string{`console sink "people"`, "digest 20261121T080000Z-1", "disk full"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
		})
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }
