// Package leaderaddr keeps, in a lease's record, the address its holder
// serves on (tenure.Config.Addr) beside the program's own payload: the
// record's payload is then a line "\xfftenure.addr=HOST:PORT\n" followed by
// the program's payload. A payload of a program begins with no 0xff byte
// (tenure.Config refuses one), so a record without an address reads as it
// always did, and a reader that predates addresses shows the line as part
// of the payload.
package leaderaddr

import (
	"bytes"
	"fmt"
	"net"
	"strings"
)

const prefix = "\xfftenure.addr="

// Join returns the record's payload for addr and payload: payload itself
// when addr is empty.
func Join(addr string, payload []byte) []byte {
	if addr == "" {
		return payload
	}
	out := make([]byte, 0, len(prefix)+len(addr)+1+len(payload))
	out = append(out, prefix...)
	out = append(out, addr...)
	out = append(out, '\n')
	return append(out, payload...)
}

// Split returns the address and the program's payload of a record's
// payload.
func Split(p []byte) (addr string, payload []byte) {
	rest, ok := bytes.CutPrefix(p, []byte(prefix))
	if !ok {
		return "", p
	}
	line, after, ok := bytes.Cut(rest, []byte{'\n'})
	if !ok {
		return "", p // not ours after all
	}
	if len(after) == 0 {
		after = nil
	}
	return string(line), after
}

// Check reports what is wrong with addr as an address others can reach:
// host:port, with a host (not 0.0.0.0 or ::). A payload that begins with
// 0xff is refused too: it would read as an address.
func Check(addr string, payload []byte) error {
	if len(payload) > 0 && payload[0] == 0xff {
		return fmt.Errorf("the payload begins with byte 0xff, which marks tenure's own fields in the record")
	}
	if addr == "" {
		return nil
	}
	if strings.IndexByte(addr, '\n') >= 0 || strings.IndexByte(addr, 0xff) >= 0 {
		return fmt.Errorf("%q has a newline or a 0xff byte", addr)
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		return fmt.Errorf("%q names no host that others can reach: give the host or IP they reach this process on", addr)
	}
	return nil
}
