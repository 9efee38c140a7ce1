package metrics

import (
	"errors"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"
)

// connBudget keeps a listener serving while hostile clients hold connections open: any pod can
// reach a node's host-network ports and every hostNetwork pod shares its loopback, so neither port
// can trust its clients to send a request, or to send it quickly.
//
// Every connection is accepted at once (nobody queues in the backlog behind idle clients) and is
// silent until its first byte, which a small goroutine awaits before handing it to net/http. A
// handed-over connection is waiting until a whole request header is read (http.StateActive) and
// again between keep-alive requests (StateIdle); otherwise it is busy. So:
//   - at most maxSilent silent connections, perSource of one source (an IPv4 address, an IPv6 /64):
//     one more closes the longest-silent one of its own source, or of the source holding the most;
//   - at most max handed to net/http, perSource of one source: one more closes the longest-waiting
//     one of its source, or of the source holding the most; with none waiting it stays silent
//     until a busy one ends. Busy ones are never closed for someone else, so net/http's goroutines
//     stay bounded by max;
//   - one that has not completed its first request header within firstRequest is closed.
//
// The kubelet writes its probe as soon as it connects (a new connection per probe), so a neighbour
// holding idle connections to 127.0.0.1 would have to open maxSilent-1 new ones within that moment
// to close it; on the probe port perSource is the whole listener, as every neighbour shares the
// kubelet's source. Prometheus' connection is alone on its source, so never the one closed first.
type connBudget struct {
	net.Listener
	max, maxSilent, perSource int
	firstRequest              time.Duration
	closed                    func(reason string) // counts connections the budget closed

	ready     chan *budgetConn
	errc      chan error
	done      chan struct{}
	closeOnce sync.Once

	mu                 sync.Mutex
	freed              *sync.Cond // a connection stopped counting, or the listener closed
	conns              map[*budgetConn]struct{}
	silentBy, servedBy map[netip.Prefix]int
	silent, served     int
}

// Reasons a connection was closed by the budget (the reason label of
// nodeaddr_listener_connections_closed_total).
const (
	closedSourceBudget  = "source_budget"
	closedListenerFull  = "listener_full"
	closedNoRequestSent = "first_request_timeout"
)

func newConnBudget(l net.Listener, maxServed, maxSilent, perSource int, firstRequest time.Duration, closed func(string)) *connBudget {
	if perSource <= 0 {
		perSource = max(maxServed, maxSilent)
	}
	b := &connBudget{Listener: l, max: max(maxServed, 1), maxSilent: max(maxSilent, 1), perSource: perSource,
		firstRequest: firstRequest, closed: closed,
		ready: make(chan *budgetConn), errc: make(chan error, 1), done: make(chan struct{}),
		conns: map[*budgetConn]struct{}{}, silentBy: map[netip.Prefix]int{}, servedBy: map[netip.Prefix]int{}}
	b.freed = sync.NewCond(&b.mu)
	go b.acceptLoop()
	return b
}

// budgetConn is one accepted connection; the fields after first are guarded by the budget's mu.
type budgetConn struct {
	net.Conn
	b      *connBudget
	source netip.Prefix
	first  []byte // the byte read while silent, returned by the first Read

	since     time.Time // last change of state
	silent    bool      // no byte received yet: not handed to net/http
	active    bool      // a request header has been read and its response is not finished
	requested bool      // a first request header was read
	gone      bool      // no longer counted
	timeout   *time.Timer
}

// Accept returns the next connection that has sent its first byte.
func (b *connBudget) Accept() (net.Conn, error) {
	select {
	case c := <-b.ready:
		return c, nil
	case err := <-b.errc:
		return nil, err
	case <-b.done:
		return nil, net.ErrClosed
	}
}

// Close stops accepting and closes the silent connections (net/http closes the others).
func (b *connBudget) Close() error {
	err := b.Listener.Close()
	b.closeOnce.Do(func() { close(b.done) })
	b.mu.Lock()
	b.freed.Broadcast()
	var silent []*budgetConn
	for c := range b.conns {
		if c.silent {
			silent = append(silent, c)
		}
	}
	b.mu.Unlock()
	for _, c := range silent {
		c.Close()
	}
	return err
}

func (b *connBudget) acceptLoop() {
	for {
		c, err := b.Listener.Accept()
		if err != nil {
			select {
			case b.errc <- err:
			case <-b.done:
				return
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		src := sourceOfRemote(c.RemoteAddr().String())
		bc := &budgetConn{Conn: c, b: b, source: src, since: time.Now(), silent: true}
		b.admitSilent(bc)
		go b.awaitFirstByte(bc)
	}
}

// awaitFirstByte hands c to net/http once it sends something (the timer set at admission closes it
// if it sends nothing within firstRequest).
func (b *connBudget) awaitFirstByte(c *budgetConn) {
	buf := make([]byte, 1)
	n, err := c.Conn.Read(buf)
	if err != nil || n == 0 {
		c.Close()
		return
	}
	c.first = buf[:n]
	if !b.admitServed(c) {
		c.Close()
		return
	}
	select {
	case b.ready <- c:
	case <-b.done:
		c.Close()
	}
}

// forget stops counting c (mu held).
func (b *connBudget) forget(c *budgetConn) {
	if c.gone {
		return
	}
	c.gone = true
	delete(b.conns, c)
	b.count(c, -1)
	if c.timeout != nil {
		c.timeout.Stop()
	}
	b.freed.Broadcast()
}

// pool is the count and per-source counts of the silent or the served connections (mu held).
func (b *connBudget) pool(silent bool) (*int, map[netip.Prefix]int) {
	if silent {
		return &b.silent, b.silentBy
	}
	return &b.served, b.servedBy
}

// count adds delta to the counts of c's pool (mu held).
func (b *connBudget) count(c *budgetConn, delta int) {
	n, by := b.pool(c.silent)
	*n += delta
	if by[c.source] += delta; by[c.source] <= 0 {
		delete(by, c.source)
	}
}

// expire closes c if it has not completed a request header by now.
func (b *connBudget) expire(c *budgetConn) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !c.requested && !c.gone {
		b.evict(c, closedNoRequestSent)
	}
}

// connState follows net/http's view of each connection (http.Server.ConnState).
func (b *connBudget) connState(nc net.Conn, s http.ConnState) {
	c := unwrapBudgetConn(nc)
	if c == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	switch s {
	case http.StateActive:
		c.active, c.requested, c.since = true, true, time.Now()
	case http.StateIdle:
		c.active, c.since = false, time.Now()
	case http.StateClosed, http.StateHijacked:
		b.forget(c)
	}
}

// Read returns the byte read while the connection was silent first.
func (c *budgetConn) Read(p []byte) (int, error) {
	if len(c.first) > 0 && len(p) > 0 {
		n := copy(p, c.first)
		c.first = c.first[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}

func (c *budgetConn) Close() error {
	err := c.Conn.Close()
	c.b.mu.Lock()
	defer c.b.mu.Unlock()
	c.b.forget(c)
	return err
}

// CloseWrite lets net/http half-close a connection it refuses (431), as it does on a bare TCPConn.
func (c *budgetConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// unwrapBudgetConn finds the budgetConn under a *tls.Conn (or returns nc itself).
func unwrapBudgetConn(nc net.Conn) *budgetConn {
	for {
		switch c := nc.(type) {
		case *budgetConn:
			return c
		case interface{ NetConn() net.Conn }:
			nc = c.NetConn()
		default:
			return nil
		}
	}
}
