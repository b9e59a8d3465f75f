// Package procmem reads a Linux process's resident memory from /proc: the
// totals of its status file and, from its smaps file, the part of it that
// is the pages of given files. relaybench's phases read it for the
// processes they measure.
package procmem

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Status holds the memory lines of a process's status file, in bytes.
type Status struct {
	// RSS is VmRSS, Anon and File its anonymous and file-backed parts
	// (RssAnon, RssFile), HWM its high-water mark (VmHWM).
	RSS, Anon, File, HWM uint64
}

// ReadStatus reads the resident memory of the process whose status file is
// path (/proc/self/status, /proc/<pid>/status).
func ReadStatus(path string) (Status, error) {
	f, err := os.Open(path)
	if err != nil {
		return Status{}, fmt.Errorf("reading resident memory: %w", err)
	}
	defer f.Close()
	var st Status
	fields := map[string]*uint64{"VmRSS:": &st.RSS, "RssAnon:": &st.Anon, "RssFile:": &st.File, "VmHWM:": &st.HWM}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 3 || f[2] != "kB" {
			continue
		}
		if p, ok := fields[f[0]]; ok {
			kb, err := strconv.ParseUint(f[1], 10, 64)
			if err != nil {
				return Status{}, fmt.Errorf("%s: %s %q: %w", path, f[0], f[1], err)
			}
			*p = kb << 10
		}
	}
	if err := sc.Err(); err != nil {
		return Status{}, fmt.Errorf("%s: %w", path, err)
	}
	if st.RSS == 0 {
		return Status{}, fmt.Errorf("%s: no VmRSS line", path)
	}
	return st, nil
}

// ReadMapped returns, for each of files (absolute paths), the resident
// memory of the process's mappings of it, in bytes, from its smaps file
// path (/proc/self/smaps): how much of the file's pages the process holds.
// A file it does not map has 0.
func ReadMapped(path string, files ...string) ([]uint64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading the mappings' resident memory: %w", err)
	}
	defer f.Close()
	sums := make([]uint64, len(files))
	cur := -1 // the index in files of the current mapping's file
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		if !strings.HasSuffix(fields[0], ":") {
			// A mapping's first line: address range, permissions, offset,
			// device, inode and, for a file, its path, which ends in
			// " (deleted)" once the file was removed or replaced.
			cur = -1
			if len(fields) >= 6 {
				name := strings.TrimSuffix(strings.Join(fields[5:], " "), " (deleted)")
				for i, file := range files {
					if name == file {
						cur = i
					}
				}
			}
			continue
		}
		if fields[0] != "Rss:" || cur < 0 {
			continue
		}
		if len(fields) != 3 || fields[2] != "kB" {
			return nil, fmt.Errorf("%s: unexpected line %q", path, line)
		}
		kb, err := strconv.ParseUint(fields[1], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%s: %q: %w", path, line, err)
		}
		sums[cur] += kb << 10
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return sums, nil
}
