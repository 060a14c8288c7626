package seam

// WakeNet carries wake-ups and renewal notices: UDP datagrams in
// production; in the simulator's real tier, the simulated network, whose
// faults (loss, duplicates, delay) and timing the world decides.
type WakeNet interface {
	// Listen listens at addr, checked by the caller, and returns the
	// listener and the address to publish for it: advertise if set.
	Listen(addr, advertise string) (WakeConn, string, error)
	// Send sends msg to addr once, from no listener.
	Send(addr string, msg []byte) error
}

// WakeConn is a wake-up listener.
type WakeConn interface {
	// Recv waits for the next message and copies it into buf; an error
	// once the listener is closed.
	Recv(buf []byte) (int, error)
	// Send sends msg to addr; one goroutine at a time.
	Send(addr string, msg []byte) error
	Close() error
	// Addr is where it listens, for the log.
	Addr() string
}

// WakeCarrier is a lease.Store that also carries the wake-ups of the
// process that uses it: the simulator's, so that a Candidate, a Locker or
// a Group it runs sends and hears them on its network. Only this module
// can name the type, so no other store is one.
type WakeCarrier interface{ WakeNet() WakeNet }
