package opendata

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"
)

func bounded(t testing.TB, in string, max int) string {
	t.Helper()
	out, err := io.ReadAll(boundStrings(strings.NewReader(in), max))
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

func TestBoundStringsCutsLongStringsOnly(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, in, want string
	}{
		{"short strings pass", `{"a":"abcd","b":[1,"x"]}`, `{"a":"abcd","b":[1,"x"]}`},
		{"long string cut", `{"a":"abcdefghij","b":2}`, `{"a":"abcd…[truncated]","b":2}`},
		{"escaped quote inside", `{"a":"ab\"cdefgh"}`, `{"a":"ab\"…[truncated]"}`},
		{"no cut inside an escape", `{"a":"abc\ndefg"}`, `{"a":"abc\n…[truncated]"}`},
		{"no cut inside a unicode escape", `{"a":"ab\u00e9xyz"}`, `{"a":"ab\u00e9…[truncated]"}`},
		{"no cut inside a UTF-8 character", `{"a":"abcéfgh"}`, `{"a":"abcé…[truncated]"}`},
		{"keys bounded too", `{"abcdefgh":1}`, `{"abcd…[truncated]":1}`},
		{"a run of continuation bytes is cut too", "{\"a\":\"\x80\x80\x80\x80\x80\x80\x80\x80\x80\"}", "{\"a\":\"\x80\x80\x80\x80\x80\x80\x80…[truncated]\"}"},
		{"not JSON passes", `{"a":"abc`, `{"a":"abc`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := bounded(t, tc.in, 4); got != tc.want {
				t.Fatalf("bounded(%s) = %s; want %s", tc.in, got, tc.want)
			}
		})
	}
}

func FuzzBoundStrings(f *testing.F) {
	for _, s := range []string{`{"a":"abcdefgh\u00e9\n\"x"}`, `["é\\", "\ud83d\ude00xxxxx"]`, `{"k":1}`, `"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		got := bounded(t, in, 4)
		if json.Valid([]byte(in)) && !json.Valid([]byte(got)) {
			t.Fatalf("valid JSON became invalid: %q -> %q", in, got)
		}
		if big := bounded(t, in, len(in)+1); big != in {
			t.Fatalf("nothing over the bound, yet %q -> %q", in, big)
		}
		if json.Valid([]byte(in)) && bytes.Count([]byte(got), []byte(truncatedMark)) == 0 && got != in {
			t.Fatalf("changed without a mark: %q -> %q", in, got)
		}
	})
}
