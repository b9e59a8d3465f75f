package procmem

import (
	"os"
	"path/filepath"
	"testing"
)

func TestReadMappedSumsTheResidentPagesOfEachFile(t *testing.T) {
	smaps := `55d0c0a00000-55d0c1200000 r--p 00000000 fd:01 1234 /opt/relay
Size:               8192 kB
Rss:                4096 kB
VmFlags: rd mr mw me sd
55d0c1200000-55d0c2200000 r-xp 00800000 fd:01 1234 /opt/relay
Rss:                1024 kB
7f0000000000-7f0010000000 r--s 00000000 fd:01 99 /var/lib/relay/relay.db
Rss:                 300 kB
7f0010000000-7f0010100000 rw-p 00000000 00:00 0
Rss:                 512 kB
7f0020000000-7f0020001000 r--p 00000000 fd:01 1235 /opt/relay (deleted)
Rss:                   4 kB
7f0030000000-7f0030001000 r--p 00000000 fd:01 77 /usr/lib/my lib.so
Rss:                   8 kB
`
	path := filepath.Join(t.TempDir(), "smaps")
	if err := os.WriteFile(path, []byte(smaps), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := ReadMapped(path, "/opt/relay", "/var/lib/relay/relay.db", "/usr/lib/my lib.so", "/absent")
	if err != nil {
		t.Fatal(err)
	}
	want := []uint64{(4096 + 1024 + 4) << 10, 300 << 10, 8 << 10, 0}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("file %d: %d bytes, want %d", i, got[i], want[i])
		}
	}
}

func TestReadMappedReadsThisProcess(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	got, err := ReadMapped("/proc/self/smaps", exe)
	if err != nil {
		t.Fatal(err)
	}
	if got[0] == 0 {
		t.Errorf("no resident page of %s, which is running", exe)
	}
}
