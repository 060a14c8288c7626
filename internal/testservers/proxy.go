package testservers

import (
	"errors"
	"net"
	"sync"
	"testing"
)

// Proxy is a TCP proxy on loopback in front of a real server, for faults
// a store wrapper cannot make: the server gone (connections refused and
// cut), or black-holed (connections kept, what is sent dropped).
type Proxy struct {
	target string

	mu    sync.Mutex // guards what follows
	ln    net.Listener
	addr  string
	conns map[net.Conn]struct{}
	hole  bool                  // black-holed: accepted, what is sent dropped
	quiet map[net.Conn]struct{} // silenced connections: what they carry is dropped for good
	wg    sync.WaitGroup
}

// NewProxy starts a proxy to target (host:port); it stops at the end of
// the test, every goroutine of it waited for.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	p := &Proxy{target: target, conns: map[net.Conn]struct{}{}, quiet: map[net.Conn]struct{}{}}
	if err := p.listen("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.close)
	return p
}

// Addr returns the address to dial instead of the target's.
func (p *Proxy) Addr() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.addr
}

func (p *Proxy) listen(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	p.mu.Lock()
	p.ln, p.addr = ln, ln.Addr().String()
	p.mu.Unlock()
	p.wg.Go(func() { p.accept(ln) })
	return nil
}

func (p *Proxy) accept(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		p.wg.Go(func() { p.serve(c) })
	}
}

func (p *Proxy) serve(c net.Conn) {
	p.mu.Lock()
	target := p.target
	p.mu.Unlock()
	s, err := net.Dial("tcp", target)
	if err != nil {
		_ = c.Close()
		return
	}
	p.mu.Lock()
	if p.ln == nil { // down meanwhile
		p.mu.Unlock()
		_ = c.Close()
		_ = s.Close()
		return
	}
	p.conns[c], p.conns[s] = struct{}{}, struct{}{}
	p.mu.Unlock()
	var both sync.WaitGroup
	pipe := func(dst, src net.Conn) {
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 && !p.holed(src) {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					break
				}
			}
			if err != nil {
				break
			}
		}
		_ = dst.Close()
		_ = src.Close()
	}
	both.Go(func() { pipe(s, c) })
	both.Go(func() { pipe(c, s) })
	both.Wait()
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, s)
	delete(p.quiet, c)
	delete(p.quiet, s)
	p.mu.Unlock()
}

// holed reports whether the proxy drops what src sends.
func (p *Proxy) holed(src net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, quiet := p.quiet[src]
	return p.hole || quiet
}

// Down stops the proxy as a stopped server would: every connection cut,
// new ones refused.
func (p *Proxy) Down() {
	p.mu.Lock()
	ln := p.ln
	p.ln = nil
	conns := p.conns
	p.conns = map[net.Conn]struct{}{}
	p.mu.Unlock()
	if ln != nil {
		_ = ln.Close()
	}
	for c := range conns {
		_ = c.Close()
	}
}

// Up listens again, on the same address, after Down.
func (p *Proxy) Up() error {
	p.mu.Lock()
	addr, up := p.addr, p.ln != nil
	p.mu.Unlock()
	if up {
		return errors.New("testservers: proxy already up")
	}
	return p.listen(addr)
}

// Blackhole keeps every connection and accepts new ones, but drops what
// either side sends until Pass: a partition that loses packets (the
// connections it cuts through are broken for good).
func (p *Proxy) Blackhole() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.hole = true
}

// Silence drops, for good, what the connections open now carry, and
// lets new ones through: a NAT or firewall that forgot a connection's
// state, and drops its packets with no FIN and no RST.
func (p *Proxy) Silence() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		p.quiet[c] = struct{}{}
	}
}

// Retarget cuts every connection and sends new ones to target: a
// failover that moved the server's address (a virtual IP, a DNS name, a
// Sentinel-aware client following the new primary).
func (p *Proxy) Retarget(target string) {
	p.mu.Lock()
	p.target = target
	conns := p.conns
	p.conns = map[net.Conn]struct{}{}
	p.mu.Unlock()
	for c := range conns {
		_ = c.Close()
	}
}

// Pass ends a Blackhole.
func (p *Proxy) Pass() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.hole = false
}

func (p *Proxy) close() {
	p.Down()
	p.wg.Wait()
}
