package manage

import (
	"cmp"
	"encoding/binary"
	"encoding/json"
	"errors"
	"time"
)

// chatterFormat is the first byte of a chatter history in its binary form
// (encodeChatter). A history written as JSON, by an earlier version, begins
// with '{': decodeChatter reads both, and the next start of its device
// writes it in the binary form.
const chatterFormat = 0x01

// encodeChatter writes st in the binary form: the format byte; whether it
// is chattering, and if so since when; its count, announcer and note; then
// each start's time, alarm, whether it was sent and its N. A time is its
// seconds since 1970 (a varint) and nanoseconds, so that every time the
// JSON form held is kept. A start's history is about 35 bytes instead of
// about 90 as JSON: the delivery loop writes one per managed start, in the
// transaction it commits before the start goes out.
func encodeChatter(st *chatterState) []byte {
	n := 16 + len(st.Announcer) + len(st.Note)
	for _, s := range st.Starts {
		n += 20 + len(s.Origin)
	}
	b := make([]byte, 0, n)
	b = append(b, chatterFormat)
	if st.Since.IsZero() {
		b = append(b, 0)
	} else {
		b = appendTime(append(b, 1), st.Since)
	}
	b = binary.AppendUvarint(b, uint64(max(st.Count, 0)))
	b = appendText(b, st.Announcer)
	b = appendText(b, st.Note)
	b = binary.AppendUvarint(b, uint64(len(st.Starts)))
	for _, s := range st.Starts {
		b = appendTime(b, s.At)
		b = appendText(b, s.Origin)
		sent := byte(0)
		if s.Sent {
			sent = 1
		}
		b = binary.AppendUvarint(append(b, sent), uint64(max(s.N, 0)))
	}
	return b
}

// decodeChatter reads a chatter history in either form.
func decodeChatter(v []byte) (chatterState, error) {
	var st chatterState
	if len(v) == 0 || v[0] != chatterFormat {
		err := json.Unmarshal(v, &st)
		return st, err
	}
	r := chatterReader{b: v[1:]}
	if r.byte() == 1 {
		st.Since = r.time()
	}
	st.Count = r.int()
	st.Announcer = r.text()
	st.Note = r.text()
	n := r.int()
	if r.err == nil && n > len(r.b)/minChatterStart {
		// Refused before room is made for n starts: a count the bytes
		// cannot hold would otherwise allocate 56 bytes a claimed start.
		r.err = errChatterShort
	}
	if r.err == nil && n > 0 {
		st.Starts = make([]chatterStart, n)
		for i := range st.Starts {
			s := &st.Starts[i]
			s.At = r.time()
			s.Origin = r.text()
			s.Sent = r.byte() == 1
			s.N = r.int()
		}
	}
	if r.err == nil && len(r.b) != 0 {
		r.err = errors.New("bytes after the last start")
	}
	if r.err != nil {
		return chatterState{}, r.err
	}
	return st, nil
}

var errChatterShort = errors.New("a binary chatter history ends early")

// minChatterStart is the fewest bytes a start takes in the binary form: its
// time's seconds and nanoseconds, its alarm's length, whether it was sent
// and its N, a byte each.
const minChatterStart = 5

func appendTime(b []byte, t time.Time) []byte {
	return binary.AppendUvarint(binary.AppendVarint(b, t.Unix()), uint64(t.Nanosecond()))
}

func appendText(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

// chatterReader reads the binary form; the first error stops it.
type chatterReader struct {
	b   []byte
	err error
}

func (r *chatterReader) byte() byte {
	if r.err != nil || len(r.b) == 0 {
		r.err = cmp.Or(r.err, errChatterShort)
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

func (r *chatterReader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = errChatterShort
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *chatterReader) int() int {
	v := r.uvarint()
	if v > 1<<31 {
		r.err = cmp.Or(r.err, errors.New("a count out of range"))
		return 0
	}
	return int(v)
}

func (r *chatterReader) time() time.Time {
	if r.err != nil {
		return time.Time{}
	}
	sec, n := binary.Varint(r.b)
	if n <= 0 {
		r.err = errChatterShort
		return time.Time{}
	}
	r.b = r.b[n:]
	nsec := r.uvarint()
	if nsec >= 1e9 {
		r.err = cmp.Or(r.err, errors.New("nanoseconds out of range"))
		return time.Time{}
	}
	return time.Unix(sec, int64(nsec)).UTC()
}

func (r *chatterReader) text() string {
	n := r.uvarint()
	if r.err != nil {
		return ""
	}
	if n > uint64(len(r.b)) {
		r.err = errChatterShort
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}
