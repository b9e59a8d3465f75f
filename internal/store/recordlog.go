package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"hash/crc64"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/klauspost/compress/s2"

	"github.com/relay-energy/relay/internal/event"
)

// The upstream record of each ongoing alarm, from which its inferred end is
// built, and the strings of each journal entry live outside the bbolt file:
// in an append-only record log beside it, <state file>.records.<generation>,
// read with pread when they are needed and never memory-mapped, so that they
// (about nine tenths of what the store held per ongoing alarm) stay out of
// the process's resident memory. An alarm's state holds a reference to its
// latest record's frame (offset and length) and a hash of the record's
// content; a new frame is appended only when the content changed. A journal
// entry holds a reference to the frame of its strings, written at the start.
//
// The file starts with recordLogMagic. Each frame is the length of its body
// (4 bytes, big-endian), the CRC-32C of the body (4 bytes), and the body: a
// format byte, then the record (encodeAlarm) compressed. Frames are appended
// inside the bbolt transaction that references them and synced before it
// commits, so a committed reference always points at durable bytes; bytes
// that no committed reference points at (a failed commit, a torn tail after
// a crash, records of alarms that ended) are garbage, which compaction drops
// by copying the live frames to the next generation.

// recordLogMagic starts every record log.
const recordLogMagic = "relayrl\x01"

// frameHeaderLen is the length and checksum before a frame's body.
const frameHeaderLen = 8

// maxFrameBody bounds a frame's body; a larger length is corruption.
const maxFrameBody = 64 << 20

// Formats of a frame body.
const (
	// frameS2Dict1 is the record compressed with s2 and recordDict1.
	frameS2Dict1 = 1
)

// DefaultCompactFloor is the garbage a record log must hold, besides more
// than its live bytes, before Prune compacts it.
const DefaultCompactFloor = 16 << 20

var (
	castagnoli = crc32.MakeTable(crc32.Castagnoli)
	crc64Table = crc64.MakeTable(crc64.ECMA)
	// dict1 compresses frames of format frameS2Dict1. It must never change:
	// frames written with it are read with it.
	dict1 = s2.MakeDict([]byte(recordDict1), nil)
)

// recordRef locates the frame of an alarm's latest record in the record
// log of the store's generation. A zero n means no record.
type recordRef struct {
	off  uint64
	n    uint32
	hash uint64 // recordHash of the record
}

// recordHash is the hash of an encoded record that tells whether a record
// changed.
func recordHash(enc []byte) uint64 { return crc64.Checksum(enc, crc64Table) }

// recordLogPath is the path of the record log of generation gen of the
// store at path.
func recordLogPath(path string, gen uint64) string {
	return path + ".records." + strconv.FormatUint(gen, 10)
}

// recordLog is one generation's record log file.
type recordLog struct {
	f    *os.File
	path string
	gen  uint64
	// end is where the next frame goes. Only a writer, holding bbolt's
	// writer lock, moves it; readers check references against it.
	end atomic.Int64

	// Guarded by Store.logMu.
	refs    int  // users besides the Store
	retired bool // closed when refs drops to 0
}

// createRecordLog creates (or truncates) the record log of generation gen,
// writes its magic and syncs the file and its directory, so that a
// reference committed later never points into a file that may vanish.
func createRecordLog(path string, gen uint64) (*recordLog, error) {
	p := recordLogPath(path, gen)
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("record log: %w", err)
	}
	l := &recordLog{f: f, path: p, gen: gen}
	l.end.Store(int64(len(recordLogMagic)))
	if _, err := f.WriteAt([]byte(recordLogMagic), 0); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("record log %s: %w", p, err)
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("record log %s: %w", p, err)
	}
	if err := syncDir(filepath.Dir(p)); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("record log %s: %w", p, err)
	}
	return l, nil
}

// openRecordLog opens the existing record log of generation gen; new frames
// go after whatever its end holds (a torn tail is garbage).
func openRecordLog(path string, gen uint64, readOnly bool) (*recordLog, error) {
	p := recordLogPath(path, gen)
	flag := os.O_RDWR
	if readOnly {
		flag = os.O_RDONLY
	}
	f, err := os.OpenFile(p, flag, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("record log %s is missing: the state file needs the record log of its generation "+
			"beside it (copy, back up and restore both together, or restore both from a backup): %w", p, err)
	}
	if err != nil {
		return nil, fmt.Errorf("record log: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("record log: %w", err)
	}
	magic := make([]byte, len(recordLogMagic))
	if _, err := f.ReadAt(magic, 0); err != nil || string(magic) != recordLogMagic {
		_ = f.Close()
		return nil, fmt.Errorf("record log %s does not start as a relay record log: %w", p, errCorrupt)
	}
	l := &recordLog{f: f, path: p, gen: gen}
	l.end.Store(st.Size())
	return l, nil
}

// removeOtherRecordLogs deletes the record logs of the store at path whose
// generation is not keep: left over by a compaction or a migration that a
// crash interrupted, nothing references them.
func removeOtherRecordLogs(path string, keep uint64) error {
	prefix := filepath.Base(path) + ".records."
	dir := filepath.Dir(path)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("record logs: %w", err)
	}
	for _, e := range entries {
		suffix, ok := strings.CutPrefix(e.Name(), prefix)
		if !ok {
			continue
		}
		gen, err := strconv.ParseUint(suffix, 10, 64)
		if err != nil || gen == keep {
			continue
		}
		if err := os.Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("record logs: removing a leftover: %w", err)
		}
	}
	return nil
}

// syncDir makes the creation or removal of a file in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// appendFrame appends the frame of encoded record enc to b.
func appendFrame(b, enc []byte) []byte {
	start := len(b)
	b = append(b, make([]byte, frameHeaderLen+1)...)
	b[start+frameHeaderLen] = frameS2Dict1
	b = append(b, make([]byte, s2.MaxEncodedLen(len(enc)))...)
	body := dict1.Encode(b[start+frameHeaderLen+1:], enc)
	b = b[:start+frameHeaderLen+1+len(body)]
	bodyLen := len(b) - start - frameHeaderLen
	binary.BigEndian.PutUint32(b[start:], uint32(bodyLen))
	binary.BigEndian.PutUint32(b[start+4:], crc32.Checksum(b[start+frameHeaderLen:], castagnoli))
	return b
}

// checkFrame checks the length and checksum of frame.
func checkFrame(frame []byte) error {
	if len(frame) < frameHeaderLen+1 {
		return fmt.Errorf("a frame of %d bytes: %w", len(frame), errCorrupt)
	}
	body := frame[frameHeaderLen:]
	if n := binary.BigEndian.Uint32(frame); int(n) != len(body) {
		return fmt.Errorf("the frame's length is %d, the reference's %d: %w", n, len(body), errCorrupt)
	}
	if crc32.Checksum(body, castagnoli) != binary.BigEndian.Uint32(frame[4:]) {
		return fmt.Errorf("checksum mismatch: %w", errCorrupt)
	}
	return nil
}

// decodeFrame checks frame (header and body) and returns its record,
// encoded.
func decodeFrame(frame []byte) ([]byte, error) {
	if err := checkFrame(frame); err != nil {
		return nil, err
	}
	body := frame[frameHeaderLen:]
	switch body[0] {
	case frameS2Dict1:
		enc, err := dict1.Decode(nil, body[1:])
		if err != nil {
			return nil, fmt.Errorf("decompressing: %v: %w", err, errCorrupt)
		}
		return enc, nil
	}
	return nil, fmt.Errorf("frame format %d is unknown (written by a newer relay?): %w", body[0], errCorrupt)
}

// readFrame reads the frame ref points at.
func (l *recordLog) readFrame(ref recordRef) ([]byte, error) {
	if end := l.end.Load(); ref.n < frameHeaderLen+1 || ref.n > frameHeaderLen+maxFrameBody || int64(ref.off)+int64(ref.n) > end {
		return nil, fmt.Errorf("frame at %d of %d bytes is outside the file (%d bytes): %w", ref.off, ref.n, end, errCorrupt)
	}
	frame := make([]byte, ref.n)
	if _, err := l.f.ReadAt(frame, int64(ref.off)); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("frame at %d of %d bytes is past the end of the file: %w", ref.off, ref.n, errCorrupt)
		}
		return nil, err
	}
	return frame, nil
}

// logTx is the record log as one bbolt read-write transaction sees it:
// frames it appends wait in pend until flush writes and syncs them, which
// the transaction does before it commits.
type logTx struct {
	log  *recordLog
	rec  *changeset // the transaction's, when it records
	pend []byte
	// live is the change in live bytes (the frames committed references
	// point at) the transaction makes.
	live int64
}

// put appends the frame of encoded record enc, whose recordHash is hash,
// and points ref at it; the frame ref pointed at before is dead.
func (t *logTx) put(ref *recordRef, enc []byte, hash uint64) {
	t.drop(ref)
	off := t.log.end.Load() + int64(len(t.pend))
	t.pend = appendFrame(t.pend, enc)
	*ref = recordRef{off: uint64(off), n: uint32(t.log.end.Load() + int64(len(t.pend)) - off), hash: hash}
	t.live += int64(ref.n)
}

// putFrame appends frame, checked, as it is and points ref, which
// referenced it in another log, at it.
func (t *logTx) putFrame(ref *recordRef, frame []byte) {
	ref.off = uint64(t.log.end.Load() + int64(len(t.pend)))
	t.pend = append(t.pend, frame...)
}

// drop makes the frame ref points at dead and clears ref.
func (t *logTx) drop(ref *recordRef) {
	t.live -= int64(ref.n)
	*ref = recordRef{}
}

// frame returns the frame ref points at, written or still pending.
func (t *logTx) frame(ref recordRef) ([]byte, error) {
	if end := t.log.end.Load(); int64(ref.off) >= end {
		i := int64(ref.off) - end
		if i+int64(ref.n) > int64(len(t.pend)) {
			return nil, fmt.Errorf("frame at %d of %d bytes is past the end of the file: %w", ref.off, ref.n, errCorrupt)
		}
		return t.pend[i : i+int64(ref.n)], nil
	}
	return t.log.readFrame(ref)
}

// record reads the record of alarm id that ref points at.
func (t *logTx) record(id []byte, ref recordRef) (event.Alarm, error) {
	frame, err := t.frame(ref)
	if err != nil {
		return event.Alarm{}, recordError(t.log, id, ref, err)
	}
	return decodeRecord(t.log, id, ref, frame)
}

// flush writes the pending frames and syncs the file.
func (t *logTx) flush() error {
	if len(t.pend) == 0 {
		return nil
	}
	end := t.log.end.Load()
	if t.rec != nil {
		t.rec.logWrite(t.log.gen, end, t.pend)
	}
	if _, err := t.log.f.WriteAt(t.pend, end); err != nil {
		return fmt.Errorf("record log %s: %w", t.log.path, err)
	}
	if err := t.log.f.Sync(); err != nil {
		return fmt.Errorf("record log %s: %w", t.log.path, err)
	}
	// Written and synced: whether the commit succeeds or not, what follows
	// goes after these bytes.
	t.log.end.Store(end + int64(len(t.pend)))
	t.pend = t.pend[:0]
	return nil
}

// readRecord reads the record of alarm id that ref points at in l.
func readRecord(l *recordLog, id []byte, ref recordRef) (event.Alarm, error) {
	frame, err := l.readFrame(ref)
	if err != nil {
		return event.Alarm{}, recordError(l, id, ref, err)
	}
	return decodeRecord(l, id, ref, frame)
}

func decodeRecord(l *recordLog, id []byte, ref recordRef, frame []byte) (event.Alarm, error) {
	enc, err := decodeFrame(frame)
	if err != nil {
		return event.Alarm{}, recordError(l, id, ref, err)
	}
	a, err := decodeAlarm(enc)
	if err != nil {
		return event.Alarm{}, recordError(l, id, ref, err)
	}
	if a.OriginID != string(id) {
		return event.Alarm{}, recordError(l, id, ref, fmt.Errorf("the frame holds the record of %q: %w", a.OriginID, errCorrupt))
	}
	return a, nil
}

// recordError names the file, the alarm and the frame of a record that
// cannot be read.
func recordError(l *recordLog, id []byte, ref recordRef, err error) error {
	return fmt.Errorf("record of alarm %q in %s (frame at %d, %d bytes): %w", id, l.path, ref.off, ref.n, err)
}
