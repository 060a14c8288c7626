package shell

import (
	"encoding/hex"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/internal/engine"
	"github.com/tenure-go/tenure/internal/seam"
	"github.com/tenure-go/tenure/lease"
)

// Wake-ups travel as UDP datagrams: one message, naming the lease or lock,
// to the address its waiter published. They carry no authority; a receiver
// rate-limits them and only reads sooner.

// NoWake, as a WakeAddr, turns wake-ups off where they would be on by
// default (tenure.NoWake).
const NoWake = "none"

// WakeMsg is a wake-up for the lease or lock name: the message names it,
// so that a wake-up meant for another on the same address is ignored.
func WakeMsg(name string) string { return "tenure wake " + name }

// NoticeMsg is a renewal notice for the lease: its leader has just renewed.
func NoticeMsg(lease string) string { return "tenure renewed " + lease }

// RenewalMsg is a renewal notice that tells the renewal: NoticeMsg, a
// newline (no lease name has one), then the version written, the token,
// the lease duration in nanoseconds and the holder in hex. A receiver
// that knows only NoticeMsg drops it, and polls.
func RenewalMsg(name string, r engine.Renewal) string {
	if r.Version == lease.NoVersion {
		return NoticeMsg(name)
	}
	return NoticeMsg(name) + "\n" + string(r.Version) + " " + strconv.FormatUint(r.Token, 10) + " " +
		strconv.FormatInt(int64(r.Duration), 10) + " " + hex.EncodeToString([]byte(r.Holder))
}

// ParseNotice reads a datagram as a renewal notice for the lease: ok if it
// is one, with the renewal it tells (Version NoVersion if none, or if what
// it tells cannot be read: then it only asks for a read).
func ParseNotice(name string, msg []byte) (r engine.Renewal, ok bool) {
	base := NoticeMsg(name)
	rest, found := strings.CutPrefix(string(msg), base)
	switch {
	case !found:
		return r, false
	case rest == "":
		return r, true
	}
	rest, found = strings.CutPrefix(rest, "\n")
	if !found {
		return r, false // another lease's, whose name this one begins
	}
	f := strings.Split(rest, " ")
	if len(f) != 4 {
		return r, true
	}
	tok, err1 := strconv.ParseUint(f[1], 10, 64)
	ns, err2 := strconv.ParseInt(f[2], 10, 64)
	holder, err3 := hex.DecodeString(f[3])
	if err1 != nil || err2 != nil || err3 != nil || f[0] == "" {
		return r, true
	}
	return engine.Renewal{Version: lease.Version(f[0]), Holder: string(holder), Token: tok, Duration: time.Duration(ns)}, true
}

// DefaultWakeAddr is where a candidate with a Priority (or a group's
// member) listens when its WakeAddr is not set: loopback, port 0, when the
// store is one host's (lease.OneHost: no other host can take part);
// otherwise port 0 on the address this host sends from by its default
// route, the one other hosts most likely reach it at (a pod's IP; a VM's
// address in its network), or loopback on a host without a route.
// Connecting a UDP socket sends nothing: it only asks the routing table.
func DefaultWakeAddr(store lease.Store) string {
	host := "127.0.0.1"
	if oh, ok := store.(lease.OneHost); ok && oh.OneHost() {
		return net.JoinHostPort(host, "0")
	}
	for _, probe := range []string{"192.0.2.1:9", "[2001:db8::1]:9"} { // documentation addresses (RFC 5737, 3849)
		if c, err := net.Dial("udp", probe); err == nil {
			host = c.LocalAddr().(*net.UDPAddr).IP.String()
			_ = c.Close()
			break
		}
	}
	return net.JoinHostPort(host, "0")
}

// CheckWake checks a wake-up address and the address advertised for it,
// for the fields named addrField and advField.
func CheckWake(addr, advertise, addrField, advField string) error {
	bad := func(field, format string, args ...any) error {
		return &election.FieldError{Field: field, Reason: fmt.Sprintf(format, args...)}
	}
	if addr == NoWake {
		addr = ""
	}
	if addr == "" {
		if advertise != "" {
			return bad(advField, "is set without %s", addrField)
		}
		return nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return &election.FieldError{Field: addrField, Err: err}
	}
	if advertise != "" {
		if _, _, err := net.SplitHostPort(advertise); err != nil {
			return &election.FieldError{Field: advField, Err: err}
		}
		return nil
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		return bad(addrField, "%q names no host that others can send to: give one, or set %s", addr, advField)
	}
	return nil
}

// WakeNet returns the network that carries the wake-ups of a process
// using store: UDP, but for the simulator's store (seam.WakeCarrier).
func WakeNet(store lease.Store) seam.WakeNet {
	if c, ok := store.(seam.WakeCarrier); ok {
		return c.WakeNet()
	}
	return udpNet{}
}

// udpNet carries wake-ups as UDP datagrams.
type udpNet struct{}

// Listen listens on addr (checked by CheckWake) and returns the address to
// publish: advertise, or addr's host with the port bound.
func (udpNet) Listen(addr, advertise string) (seam.WakeConn, string, error) {
	conn, err := net.ListenPacket("udp", addr)
	if err != nil {
		return nil, "", fmt.Errorf("tenure: wake-up listener: %w", err)
	}
	if advertise == "" {
		host, _, _ := net.SplitHostPort(addr)
		_, port, _ := net.SplitHostPort(conn.LocalAddr().String())
		advertise = net.JoinHostPort(host, port)
	}
	return &udpConn{pc: conn}, advertise, nil
}

func (udpNet) Send(addr string, msg []byte) error {
	conn, err := net.Dial("udp", addr)
	if err != nil {
		return err
	}
	_, err = conn.Write(msg)
	_ = conn.Close()
	return err
}

// udpConn is a UDP wake-up listener. It resolves each address it sends to
// once in a row (it may be a name).
type udpConn struct {
	pc   net.PacketConn
	last string
	to   net.Addr
}

func (c *udpConn) Recv(buf []byte) (int, error) {
	n, _, err := c.pc.ReadFrom(buf)
	return n, err
}

func (c *udpConn) Send(addr string, msg []byte) error {
	if addr != c.last || c.to == nil {
		c.last, c.to = addr, nil
		ua, err := net.ResolveUDPAddr("udp", addr)
		if err != nil {
			return err
		}
		c.to = ua
	}
	_, err := c.pc.WriteTo(msg, c.to)
	return err
}

func (c *udpConn) Close() error { return c.pc.Close() }
func (c *udpConn) Addr() string { return c.pc.LocalAddr().String() }

// datagram is a message to send, and where.
type datagram struct{ addr, msg string }

// Sender sends datagrams from a listener's socket on a goroutine of its
// own, so that a loop never waits on the network: Send drops a
// datagram when those before it are still queued.
type Sender struct {
	conn seam.WakeConn
	q    chan datagram
	log  func(level slog.Level, msg string, args ...any)
}

// NewSender returns a sender on conn's socket that queues at most queue
// datagrams.
func NewSender(conn seam.WakeConn, queue int, log func(level slog.Level, msg string, args ...any)) *Sender {
	return &Sender{conn: conn, q: make(chan datagram, queue), log: log}
}

// Send queues msg to addr, or drops it if the queue is full.
func (s *Sender) Send(addr, msg string) {
	select {
	case s.q <- datagram{addr, msg}:
	default:
		s.log(slog.LevelDebug, "wake-up not sent: too many at once", "addr", addr)
	}
}

// Run sends the queued datagrams until quit is closed, and then those
// still queued (an Unlock just before Close wakes its waiter all the same):
// the socket must stay open until Run returns.
func (s *Sender) Run(quit <-chan struct{}) {
	send := func(d datagram) {
		if err := s.conn.Send(d.addr, []byte(d.msg)); err != nil {
			s.log(slog.LevelDebug, "not sent", "msg", d.msg, "addr", d.addr, "err", err)
		}
	}
	for {
		select {
		case d := <-s.q:
			send(d)
		case <-quit:
			for {
				select {
				case d := <-s.q:
					send(d)
				default:
					return
				}
			}
		}
	}
}
