package opendata

import (
	"bytes"
	"io"
)

// MaxStringBytes bounds every JSON string of an upstream answer: a longer
// one (a payload or note of megabytes) is cut there, at a character
// boundary, and ends in truncatedMark. With answers read through
// boundStrings, one answer costs memory in proportion to its records, not to
// its bytes, so no upstream answer can exhaust a small pod.
const MaxStringBytes = 16 << 10

// truncatedMark ends every string cut at MaxStringBytes.
const truncatedMark = "…[truncated]"

// boundStrings returns a reader of r in which every JSON string longer than
// max bytes is cut to max bytes plus truncatedMark. It never cuts inside an
// escape sequence or a UTF-8 character, so valid JSON stays valid; what is
// not JSON passes through, for the decoder to refuse.
func boundStrings(r io.Reader, max int) io.Reader {
	return &stringBound{r: r, max: max, buf: make([]byte, 64<<10)}
}

// stringBound is the reader boundStrings returns. It copies runs of bytes
// at once and looks at single bytes only at quotes, backslashes and the
// cut, so that a huge answer costs little more than reading it.
type stringBound struct {
	r   io.Reader
	max int
	err error

	buf  []byte
	i, n int // buf[i:n] is read and not yet passed on

	inString bool
	escaped  bool // the previous byte was a backslash
	hold     int  // hex digits of a \u escape still to pass
	size     int  // bytes of the current string passed
	skipping bool // the current string was cut; drop to its closing quote
	pending  string
}

func (s *stringBound) Read(p []byte) (int, error) {
	out := 0
	for out < len(p) {
		if s.pending != "" {
			c := copy(p[out:], s.pending)
			s.pending = s.pending[c:]
			out += c
			continue
		}
		if s.i == s.n {
			if s.err != nil {
				break
			}
			s.i = 0
			s.n, s.err = s.r.Read(s.buf)
			continue
		}
		out += s.step(p[out:])
	}
	if out > 0 {
		return out, nil
	}
	return 0, s.err
}

// step passes on what it can of buf[i:n] into p and returns how much it
// wrote: a run of plain bytes in one copy, or one byte whose meaning
// (quote, backslash, escape, the cut) it tracks.
func (s *stringBound) step(p []byte) int {
	in := s.buf[s.i:s.n]
	if !s.inString {
		// Outside strings everything passes, up to the next quote.
		k := bytes.IndexByte(in, '"')
		if k < 0 {
			k = len(in)
		} else {
			k++
			s.inString, s.size, s.skipping = true, 0, false
		}
		return s.pass(p, in[:k])
	}
	if s.skipping && s.hold == 0 && !s.escaped {
		// Drop the rest of a cut string, up to a backslash or its quote.
		k := bytes.IndexAny(in, `"\`)
		if k < 0 {
			s.i = s.n
			return 0
		}
		s.i += k
		in = in[k:]
	}
	if !s.skipping && s.hold == 0 && !s.escaped && s.size < s.max {
		// A run of plain characters below the bound passes at once.
		k := bytes.IndexAny(in, `"\`)
		if k < 0 {
			k = len(in)
		}
		k = min(k, s.max-s.size)
		if k > 0 {
			n := s.pass(p, in[:k])
			s.size += n
			return n
		}
	}
	b := in[0]
	s.i++
	if !s.keep(b) {
		return 0
	}
	p[0] = b
	return 1
}

// pass copies as much of run into p as fits and consumes it from buf.
func (s *stringBound) pass(p, run []byte) int {
	n := copy(p, run)
	s.i += n
	return n
}

// keep reports whether b, a byte inside a string, passes, and tracks where
// the string is.
func (s *stringBound) keep(b byte) bool {
	switch {
	case s.hold > 0:
		s.hold--
	case s.escaped:
		s.escaped = false
		if b == 'u' {
			s.hold = 4
		}
	case b == '\\':
		if !s.skipping && s.size >= s.max {
			s.cut()
		}
		s.escaped = true
	case b == '"':
		s.inString = false
		return true
	case !s.skipping && s.size >= s.max && (b&0xC0 != 0x80 || s.size >= s.max+3):
		// b starts the next character, so everything passed is whole; or
		// three continuation bytes have passed the bound, which no UTF-8
		// character has (a run of them must not escape the bound).
		s.cut()
	}
	if s.skipping {
		return false
	}
	s.size++
	return true
}

func (s *stringBound) cut() {
	s.skipping = true
	s.pending = truncatedMark
}
