package main

import (
	"bufio"
	"os"
	"runtime/debug"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// shedStartupPages drops from this process's resident set the pages of
// its executable that it mapped in to start. Every package's init runs at
// start, the store SDKs' among them (type registrations, endpoint and
// schema tables), and each page fault maps up to 64 KB around it: tens of
// MB of the binary, of which a running tenure then uses a few. The
// read-only mappings of the executable (its code and constant data) are
// dropped with MADV_DONTNEED: the kernel keeps them in its page cache,
// shared, and maps back what the process touches again, from there. Its
// writable data is left alone. The heap's garbage of the start (the SDKs'
// parsed configuration and endpoint rules) goes back to the system too.
func shedStartupPages() {
	debug.FreeOSMemory()
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return
	}
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// start-end perms offset dev inode path
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 || fields[5] != exe || fields[1][1] == 'w' {
			continue
		}
		start, end, ok := strings.Cut(fields[0], "-")
		if !ok {
			continue
		}
		s, err1 := strconv.ParseUint(start, 16, 64)
		e, err2 := strconv.ParseUint(end, 16, 64)
		if err1 != nil || err2 != nil || e <= s {
			continue
		}
		_, _, _ = unix.Syscall(unix.SYS_MADVISE, uintptr(s), uintptr(e-s), unix.MADV_DONTNEED)
	}
}
