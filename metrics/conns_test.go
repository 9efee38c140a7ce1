package metrics

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// dialFrom connects to addr from the loopback address src (127.0.0.0/8 is all local on Linux).
func dialFrom(t *testing.T, src, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// closedByServer reports whether the server closed c: a read returns EOF or a reset. It waits at
// most 10 s, which only a connection the server keeps open reaches.
func closedByServer(c net.Conn) bool {
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err := c.Read(make([]byte, 1))
	return err != nil && !errors.Is(err, os.ErrDeadlineExceeded)
}

// get sends a keep-alive GET path on c and returns the status (0 on error).
func getOn(c net.Conn, path string) int {
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	defer func() { _ = c.SetDeadline(time.Time{}) }()
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", path)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// kubeletProbe is the kubelet's HTTP probe: a new connection, Connection: close, the default 1 s
// timeout (pkg/probe/http).
func kubeletProbe(addr string) error {
	hc := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := hc.Get("http://" + addr + "/healthz")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return nil
}

func closedCount(m *Metrics, listener, reason string) float64 {
	return testutil.ToFloat64(m.listenerClosed.WithLabelValues(listener, reason))
}

// One source (an IPv4 address) holding connections that send nothing, beyond its budget, closes
// its own oldest one; another source's keep-alive connection and new connections are served.
func TestConnBudgetPerSource(t *testing.T) {
	m := New("test", "abc")
	lim := defaultLimits
	lim.FirstRequestTimeout, lim.ReadHeaderTimeout = time.Minute, time.Minute // only the budget closes
	s := &Server{MetricsAddr: freeAddr(t), Metrics: m, Limits: lim}
	startServer(t, s)
	scraper := dialFrom(t, "127.0.0.9", s.MetricsAddr)
	if code := getOn(scraper, "/metrics"); code != 200 {
		t.Fatalf("scraper: %d", code)
	}
	var held []net.Conn
	for i := 0; i < 10; i++ {
		held = append(held, dialFrom(t, "127.0.0.2", s.MetricsAddr))
	}
	// The six oldest were closed, one per connection beyond 4; the 4 newest are open and served.
	for i, c := range held[:6] {
		if !closedByServer(c) {
			t.Errorf("idle connection %d of 10 from one source still open", i)
		}
	}
	for i, c := range held[6:] {
		if code := getOn(c, "/metrics"); code != 200 {
			t.Errorf("connection %d within the source's budget: %d", i+6, code)
		}
	}
	if code := getOn(scraper, "/metrics"); code != 200 {
		t.Errorf("the other source's keep-alive connection: %d", code)
	}
	if got := closedCount(m, "metrics", closedSourceBudget); got != 6 {
		t.Errorf("closed for the source budget: %v, want 6", got)
	}
}

// Many sources filling the listener with unfinished request headers close the waiting connections
// of the sources holding the most, never the scraper's idle keep-alive connection (one per source).
func TestConnBudgetListenerFull(t *testing.T) {
	m := New("test", "abc")
	lim := defaultLimits
	lim.FirstRequestTimeout, lim.ReadHeaderTimeout = time.Minute, time.Minute
	s := &Server{MetricsAddr: freeAddr(t), Metrics: m, Limits: lim}
	startServer(t, s)
	scraper := dialFrom(t, "127.0.0.9", s.MetricsAddr)
	if code := getOn(scraper, "/metrics"); code != 200 {
		t.Fatalf("scraper: %d", code)
	}
	for src := 2; src <= 8; src++ { // 7 sources × 4 = 28 connections for 15 free slots
		for i := 0; i < 4; i++ {
			c := dialFrom(t, fmt.Sprintf("127.0.0.%d", src), s.MetricsAddr)
			fmt.Fprint(c, "G") // the first byte of a header never finished
		}
	}
	// 13 closed: 16 slots hold the scraper and 15 others (polled: connections are handed over
	// as their first byte arrives).
	for end := time.Now().Add(10 * time.Second); closedCount(m, "metrics", closedListenerFull) < 13 && time.Now().Before(end); {
		time.Sleep(10 * time.Millisecond)
	}
	if got := closedCount(m, "metrics", closedListenerFull); got != 13 {
		t.Errorf("closed because the listener was full: %v, want 13", got)
	}
	if code := getOn(scraper, "/metrics"); code != 200 {
		t.Errorf("the scraper's keep-alive connection: %d", code)
	}
	if code := getOn(dialFrom(t, "127.0.0.10", s.MetricsAddr), "/metrics"); code != 200 {
		t.Errorf("a new source while the listener is full: %d", code)
	}
}

// A connection that sends nothing, or sends its header byte by byte, is closed once
// FirstRequestTimeout has passed without a whole header; a prompt client is served.
func TestConnBudgetFirstRequestTimeout(t *testing.T) {
	m := New("test", "abc")
	lim := defaultLimits
	lim.FirstRequestTimeout = 200 * time.Millisecond
	s := &Server{ProbeAddr: freeAddr(t), Metrics: m, Limits: lim}
	startServer(t, s)
	idle := dialFrom(t, "127.0.0.1", s.ProbeAddr)
	slow := dialFrom(t, "127.0.0.1", s.ProbeAddr)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, b := range []byte("GET /healthz HTTP/1.1\r\nHost: x\r\n") {
			if _, err := slow.Write([]byte{b}); err != nil {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	if !closedByServer(idle) {
		t.Error("a connection that sent nothing is still open")
	}
	if !closedByServer(slow) {
		t.Error("a connection sending its header byte by byte is still open")
	}
	<-done
	if err := kubeletProbe(s.ProbeAddr); err != nil {
		t.Errorf("probe: %v", err)
	}
	if got := closedCount(m, "probes", closedNoRequestSent); got != 2 {
		t.Errorf("closed for no first request: %v, want 2", got)
	}
}

// A neighbour on the node holding 96 idle connections to the probe port (from 127.0.0.1, the
// kubelet's own source address) does not make the kubelet's probes fail.
func TestProbePortIdleConnections(t *testing.T) {
	m := New("test", "abc")
	s := &Server{ProbeAddr: freeAddr(t), Metrics: m}
	startServer(t, s)
	var held []net.Conn
	for i := 0; i < 96; i++ {
		held = append(held, dialFrom(t, "127.0.0.1", s.ProbeAddr))
	}
	for i := 0; i < 5; i++ {
		if err := kubeletProbe(s.ProbeAddr); err != nil {
			t.Fatalf("probe %d with 96 idle connections held: %v", i, err)
		}
	}
	if got := closedCount(m, "probes", closedSourceBudget) + closedCount(m, "probes", closedListenerFull); got < 32 {
		t.Errorf("closed for the budget: %v, want at least 32 of the 96 (64 silent connections kept)", got)
	}
	if !closedByServer(held[0]) {
		t.Error("the oldest idle connection is still open")
	}
}

// A keep-alive connection idle between scrapes for longer than the first-request and header
// timeouts stays open: only IdleTimeout bounds the wait for the next request (Prometheus scrapes
// every 30 s over one connection).
func TestConnBudgetKeepsIdleKeepAlive(t *testing.T) {
	lim := defaultLimits
	lim.FirstRequestTimeout, lim.ReadHeaderTimeout = 100*time.Millisecond, 100*time.Millisecond
	s := &Server{MetricsAddr: freeAddr(t), Metrics: New("test", "abc"), Limits: lim}
	startServer(t, s)
	c := dialFrom(t, "127.0.0.9", s.MetricsAddr)
	for i := 0; i < 3; i++ {
		if code := getOn(c, "/metrics"); code != 200 {
			t.Fatalf("request %d on the keep-alive connection: %d", i, code)
		}
		time.Sleep(300 * time.Millisecond) // idle three times the header timeout
	}
}

// A source is an IPv4 address (an IPv4-mapped IPv6 address is the same source) or an IPv6 /64:
// a host picks addresses from its /64 freely.
func TestSourceOf(t *testing.T) {
	for addr, want := range map[string]string{
		"192.0.2.7:40000":            "192.0.2.7/32",
		"[::ffff:192.0.2.7]:40000":   "192.0.2.7/32",
		"[2001:db8:1:2::5]:443":      "2001:db8:1:2::/64",
		"[2001:db8:1:2:ffff::9]:443": "2001:db8:1:2::/64",
		"[fe80::1%eth0]:80":          "fe80::/64",
	} {
		ap := net.TCPAddrFromAddrPort(netip.MustParseAddrPort(addr))
		if got := sourceOfRemote(ap.String()).String(); got != want { // a connection's RemoteAddr
			t.Errorf("sourceOfRemote(%s) = %s, want %s", ap, got, want)
		}
		if got := sourceOfRemote(addr).String(); got != want {
			t.Errorf("sourceOfRemote(%s) = %s, want %s", addr, got, want)
		}
	}
}
