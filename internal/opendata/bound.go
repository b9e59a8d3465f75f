package opendata

import (
	"bufio"
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
	return &stringBound{r: bufio.NewReaderSize(r, 64<<10), max: max}
}

type stringBound struct {
	r   *bufio.Reader
	max int
	err error

	inString bool
	escaped  bool // the previous byte was a backslash
	hold     int  // hex digits of a \u escape still to pass
	n        int  // bytes of the current string passed
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
		if s.err != nil {
			break
		}
		b, err := s.r.ReadByte()
		if err != nil {
			s.err = err
			break
		}
		if s.keep(b) {
			p[out] = b
			out++
		}
	}
	if out > 0 {
		return out, nil
	}
	return 0, s.err
}

// keep reports whether b passes, and tracks where the stream is.
func (s *stringBound) keep(b byte) bool {
	if !s.inString {
		if b == '"' {
			s.inString, s.n, s.skipping = true, 0, false
		}
		return true
	}
	switch {
	case s.hold > 0:
		s.hold--
	case s.escaped:
		s.escaped = false
		if b == 'u' {
			s.hold = 4
		}
	case b == '\\':
		if !s.skipping && s.n >= s.max {
			s.cut()
		}
		s.escaped = true
	case b == '"':
		s.inString = false
		return true
	case !s.skipping && s.n >= s.max && b&0xC0 != 0x80:
		// b starts the next character: everything passed is whole.
		s.cut()
	}
	if s.skipping {
		return false
	}
	s.n++
	return true
}

func (s *stringBound) cut() {
	s.skipping = true
	s.pending = truncatedMark
}
