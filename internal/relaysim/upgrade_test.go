package relaysim

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify/notifytest"
	"github.com/relay-energy/relay/internal/store"
)

// Upgrades. A share of the seeds start from a state file written by a relay
// of each schema version the store still opens, instead of an empty store:
// testdata/upgrade/v<N>, each written by the code of its version (the
// generator beside it says how), with ongoing alarms at every level, starts
// delivered and pending, dead letters, ended alarms and, from version 3, an
// acknowledgement and an escalation step taken; in version 4 (main's, before
// the ongoing alarms' keys of version 5), alarms with ids the upstream
// sends as numbers among them. The model learns what the file holds from
// the manifest beside it, so that every invariant is checked through the
// upgrade.

// upgradeVersions are the schema versions of the state files, oldest first.
var upgradeVersions = []int{1, 2, 3, 4}

// upgradeOf returns the schema version of the state file seed starts from,
// or 0 for an empty store: every eighth seed, from the fifth, takes each
// version in turn. It draws nothing from the seed's random stream, so that
// the operations of every seed stay as they were.
func upgradeOf(seed uint64) int {
	if seed%8 != 5 {
		return 0
	}
	return upgradeVersions[seed/8%uint64(len(upgradeVersions))]
}

// withUpgrade puts the state file seed starts from, if any, first in ops.
func withUpgrade(seed uint64, ops []op) []op {
	if v := upgradeOf(seed); v != 0 {
		return append([]op{opUpgrade{version: v}}, ops...)
	}
	return ops
}

// opUpgrade is the first operation of a seed that starts from a state file
// of an earlier relay: the world starts from it (runOps reads it before the
// relay starts), so that a printed or shrunk list says where it started.
type opUpgrade struct{ version int }

func (o opUpgrade) String() string {
	return fmt.Sprintf("start from the version-%d state file (testdata/upgrade/v%d)", o.version, o.version)
}

func (opUpgrade) apply(*world) error { return errSkip }

// upgradeIn returns the schema version of the state file ops start from, 0
// for none.
func upgradeIn(ops []op) int {
	if len(ops) > 0 {
		if u, ok := ops[0].(opUpgrade); ok {
			return u.version
		}
	}
	return 0
}

// manifest is what a state file of testdata/upgrade holds, as the generator
// read it back from the store and the fakes before it closed the file.
type manifest struct {
	Schema int                `json:"schema"`
	Alarms []manifestAlarm    `json:"alarms"`
	Dests  map[string]manDest `json:"destinations"`
	Acks   []struct {
		ID string    `json:"id"`
		By string    `json:"by"`
		At time.Time `json:"at"`
	} `json:"acks"`
	Escalations []struct {
		ID   string    `json:"id"`
		Step string    `json:"step"`
		At   time.Time `json:"at"`
	} `json:"escalations"`
}

type manifestAlarm struct {
	ID        string    `json:"id"`
	Station   string    `json:"station"`
	Device    string    `json:"device"`
	Code      string    `json:"code"`
	Level     int       `json:"level"`
	Occurred  time.Time `json:"occurred"`
	Status    int       `json:"status"`
	Recovered time.Time `json:"recovered"`
}

// manDest is what became of the events of one destination.
type manDest struct {
	Sink string `json:"sink"`
	// Enqueued are the events enqueued for it (routed by the rules, or by
	// an escalation step), with when.
	Enqueued []manEvent `json:"enqueued"`
	// Delivered are the events it accepted, in order.
	Delivered []manEvent `json:"delivered"`
	Pending   []string   `json:"pending"`
	Dead      []struct {
		ID string `json:"id"`
	} `json:"dead"`
}

type manEvent struct {
	ID    string    `json:"id"`
	Level int       `json:"level"`
	At    time.Time `json:"at"`
	// TS is the message ts of a start posted to the Slack channel.
	TS string `json:"ts"`
}

// stateFile is one state file of testdata/upgrade, read once per process.
type stateFile struct {
	manifest manifest
	// files are the state file and its record log, unzipped, by name.
	files map[string]*sparseFile
}

var stateFiles struct {
	once sync.Once
	byV  map[int]*stateFile
	err  error
}

// loadStateFile returns the state file of schema version v.
func loadStateFile(v int) (*stateFile, error) {
	stateFiles.once.Do(func() {
		stateFiles.byV = map[int]*stateFile{}
		for _, v := range upgradeVersions {
			f, err := readStateFile(filepath.Join("testdata", "upgrade", fmt.Sprintf("v%d", v)))
			if err != nil {
				stateFiles.err = err
				return
			}
			if f.manifest.Schema != v {
				stateFiles.err = fmt.Errorf("testdata/upgrade/v%d holds schema version %d", v, f.manifest.Schema)
				return
			}
			stateFiles.byV[v] = f
		}
	})
	if stateFiles.err != nil {
		return nil, stateFiles.err
	}
	f, ok := stateFiles.byV[v]
	if !ok {
		return nil, fmt.Errorf("no state file of schema version %d", v)
	}
	return f, nil
}

func readStateFile(dir string) (*stateFile, error) {
	f := &stateFile{files: map[string]*sparseFile{}}
	b, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, &f.manifest); err != nil {
		return nil, fmt.Errorf("%s/manifest.json: %w", dir, err)
	}
	gzs, err := filepath.Glob(filepath.Join(dir, "relay.db*.gz"))
	if err != nil {
		return nil, err
	}
	for _, name := range gzs {
		b, err := os.ReadFile(name)
		if err != nil {
			return nil, err
		}
		data, err := unzipSparse(b)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		f.files[strings.TrimSuffix(filepath.Base(name), ".gz")] = data
	}
	if f.files["relay.db"] == nil {
		return nil, fmt.Errorf("%s: no relay.db.gz", dir)
	}
	return f, nil
}

// sparseFile is a file's bytes without its blocks of zeros: a state file is
// mostly bbolt's free pages, and unzipping them into one buffer, or holding
// them, would cost seconds under the race detector.
type sparseFile struct {
	size   int64
	blocks []block
}

// block is a block of a sparseFile that holds more than zeros.
type block struct {
	off  int64
	data []byte
}

// unzipSparse unzips the gzip stream b.
func unzipSparse(b []byte) (*sparseFile, error) {
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	f := &sparseFile{}
	buf, zeros := make([]byte, 4096), make([]byte, 4096)
	for {
		n, err := io.ReadFull(zr, buf)
		if n > 0 && !bytes.Equal(buf[:n], zeros[:n]) {
			f.blocks = append(f.blocks, block{off: f.size, data: bytes.Clone(buf[:n])})
		}
		f.size += int64(n)
		switch err {
		case nil:
		case io.EOF, io.ErrUnexpectedEOF:
			return f, nil
		default:
			return nil, err
		}
	}
}

// write writes the file at path, its zeros as holes.
func (f *sparseFile) write(path string) error {
	out, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	for _, b := range f.blocks {
		if _, err := out.WriteAt(b.data, b.off); err != nil {
			out.Close()
			return err
		}
	}
	if err := out.Truncate(f.size); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// holds reports whether the state file holds the alarm id.
func (f *stateFile) holds(id string) bool {
	return slices.ContainsFunc(f.manifest.Alarms, func(a manifestAlarm) bool { return a.ID == id })
}

// upgraded is what the world knows of the state file it started from.
type upgraded struct {
	// before holds, per destination, what its receiver accepted before the
	// upgrade, in order: a receiver of the run has none of it.
	before map[string][]delivery
	// threads maps the ts of each start posted to the Slack channel before
	// the upgrade to its alarm, so that an end threaded under it is known.
	threads map[string]string
}

// startFrom puts the state file of schema version v where the relay will
// open it, the messages of its Slack channel in the fake's channel, and
// what it holds in the model: its alarms (the ongoing ones among the
// operations' picks), the events routed, the deliveries made and the
// acknowledgements given before the upgrade. It does nothing for v 0.
func (w *world) startFrom(v int) error {
	if v == 0 {
		return nil
	}
	f, err := loadStateFile(v)
	if err != nil {
		return err
	}
	for name, data := range f.files {
		if err := data.write(filepath.Join(filepath.Dir(w.path), name)); err != nil {
			return fmt.Errorf("copying the version-%d state file: %w", v, err)
		}
	}
	m := &f.manifest
	u := &upgraded{before: map[string][]delivery{}, threads: map[string]string{}}
	byID := map[string]*alarm{}
	for _, ma := range m.Alarms {
		a := &alarm{id: ma.ID, station: ma.Station, device: ma.Device, code: ma.Code, level: ma.Level, startLevel: ma.Level,
			occurred: ma.Occurred, recovered: ma.Recovered, status: ma.Status}
		w.alarms = append(w.alarms, a)
		if a.status == event.StatusOngoing {
			w.ongoing = append(w.ongoing, a)
		}
		byID[a.id] = a
	}
	for _, ack := range m.Acks {
		a := byID[ack.ID]
		if a == nil {
			return fmt.Errorf("the version-%d manifest acknowledges %s, which it does not hold", v, ack.ID)
		}
		a.acked = append(a.acked, ackSpan{from: ack.At})
	}
	for _, dest := range slices.Sorted(maps.Keys(m.Dests)) {
		md := m.Dests[dest]
		if destOf(md.Sink) != dest {
			return fmt.Errorf("the version-%d manifest has sink %q at destination %s", v, md.Sink, dest)
		}
		w.routed[dest] = map[string]enqueued{}
		for _, e := range md.Enqueued {
			if _, ok := w.routed[dest][e.ID]; !ok {
				w.routed[dest][e.ID] = enqueued{at: e.At, level: e.Level}
			}
		}
		for _, e := range md.Delivered {
			origin := originOf(e.ID)
			tr := event.Transition(e.ID[len(origin)+1:])
			d := delivery{id: e.ID, origin: origin, tr: tr, at: e.At, level: e.Level}
			if dest == destPager {
				// The channel shows starts, ends and invalids as delivered
				// reads them (an acknowledgement edits its start).
				if tr != event.Start && tr != event.End && tr != event.Invalid {
					continue
				}
				d.level = -1
				if tr == event.Start {
					u.threads[e.TS] = origin
					w.slack.Posted(notifytest.SlackMessage{Channel: "C1", TS: e.TS, Text: "start " + origin})
				}
			}
			u.before[dest] = append(u.before[dest], d)
		}
	}
	// First seen when the file's relay enqueued its start first; whether
	// the rules then escalated it, the model does not know (escalating is
	// false: no step is required of it, and none may come early).
	for _, a := range byID {
		start := event.ID(a.id, event.Start)
		for _, r := range w.routed {
			if e, ok := r[start]; ok && (a.firstSeen.IsZero() || e.at.Before(a.firstSeen)) {
				a.firstSeen = e.at
			}
		}
		if a.firstSeen.IsZero() {
			a.firstSeen = a.occurred
		}
	}
	w.upgraded = u
	return nil
}

// deliveredBefore returns what dest's receiver accepted before the upgrade
// the run started from, and, for the Slack channel, the start each message
// ts was posted for.
func (w *world) deliveredBefore(dest string) ([]delivery, map[string]string) {
	if w.upgraded == nil {
		return nil, map[string]string{}
	}
	return slices.Clone(w.upgraded.before[dest]), maps.Clone(w.upgraded.threads)
}

// TestUpgradeStateFilesHoldWhatTheirManifestsSay opens each state file of
// testdata/upgrade with today's store, as a seed's relay does, and checks
// that it holds what its manifest, from which the model learns, says: the
// ongoing alarms, each destination's pending entries and dead letters, the
// Slack channel's ts of each start delivered there, the acknowledgements
// and the escalation steps.
func TestUpgradeStateFilesHoldWhatTheirManifestsSay(t *testing.T) {
	for _, v := range upgradeVersions {
		t.Run(fmt.Sprintf("v%d", v), func(t *testing.T) {
			f, err := loadStateFile(v)
			if err != nil {
				t.Fatal(err)
			}
			dir := stateDir(t, t.TempDir())
			for name, data := range f.files {
				if err := data.write(filepath.Join(dir, name)); err != nil {
					t.Fatal(err)
				}
			}
			st, err := store.Open(filepath.Join(dir, "relay.db"), store.Options{Clock: clock.NewFake(t0), LockTimeout: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			m := &f.manifest
			ongoing, err := st.Ongoing()
			if err != nil {
				t.Fatal(err)
			}
			var got, want []string
			for _, a := range ongoing {
				got = append(got, a.OriginID)
			}
			for _, a := range m.Alarms {
				if a.Status == event.StatusOngoing {
					want = append(want, a.ID)
				}
			}
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("ongoing alarms %v, the manifest says %v", got, want)
			}
			for dest, md := range m.Dests {
				pend, err := st.Pending(md.Sink, 1000)
				if err != nil {
					t.Fatal(err)
				}
				var ids []string
				for _, e := range pend {
					ids = append(ids, e.EventID)
				}
				if !slices.Equal(ids, md.Pending) {
					t.Errorf("%s: pending %v, the manifest says %v", dest, ids, md.Pending)
				}
				dead, err := st.DeadLetters(md.Sink)
				if err != nil {
					t.Fatal(err)
				}
				ids = nil
				for _, d := range dead {
					ids = append(ids, d.EventID)
				}
				var wantDead []string
				for _, d := range md.Dead {
					wantDead = append(wantDead, d.ID)
				}
				if !slices.Equal(ids, wantDead) {
					t.Errorf("%s: dead letters %v, the manifest says %v", dest, ids, wantDead)
				}
				for _, e := range md.Delivered {
					if dest != destPager || !strings.HasSuffix(e.ID, ":start") {
						continue
					}
					mem, err := st.Memory(md.Sink, originOf(e.ID))
					if err != nil {
						t.Fatal(err)
					}
					if mem["ts"] != e.TS || mem["channel"] != "C1" || e.TS == "" {
						t.Errorf("%s: %s: the sink's memory is %v, the manifest says ts %q in C1", dest, e.ID, mem, e.TS)
					}
				}
			}
			for _, a := range m.Acks {
				raw, err := st.Get("ack", a.ID)
				if err != nil {
					t.Fatal(err)
				}
				var ack struct {
					Acked bool      `json:"acked"`
					By    string    `json:"by"`
					Via   string    `json:"via"`
					At    time.Time `json:"at"`
				}
				if err := json.Unmarshal(raw, &ack); err != nil || !ack.Acked || ack.Via+":"+ack.By != a.By || !ack.At.Equal(a.At) {
					t.Errorf("%s: acknowledgement %s (%v), the manifest says by %s at %s", a.ID, raw, err, a.By, a.At)
				}
			}
			for _, e := range m.Escalations {
				raw, err := st.Get("escalate", e.ID)
				if err != nil {
					t.Fatal(err)
				}
				var es struct {
					Done map[string]time.Time `json:"done"`
				}
				if err := json.Unmarshal(raw, &es); err != nil || !es.Done[e.Step].Equal(e.At) {
					t.Errorf("%s: escalation %s (%v), the manifest says step %s at %s", e.ID, raw, err, e.Step, e.At)
				}
			}
		})
	}
}
