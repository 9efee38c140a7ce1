package harness

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// Ports for servers the tests start on the host's loopback (kube-apiserver, etcd, Prometheus).
//
// A port the kernel hands out for "127.0.0.1:0" comes from the ephemeral range, which is also where
// every outgoing connection takes its source port: between FreePort returning and the server
// binding, a client connection (kube-apiserver to etcd, a test's client, another package's test
// running in parallel) can take it, and the server fails with "address already in use". So
// FreePort picks from below the ephemeral range, where the kernel never assigns a source port,
// and reserves each port with a flock held until the test process exits, so that test binaries
// running in parallel (go test runs packages concurrently) never choose the same one.

var ports struct {
	mu    sync.Mutex
	held  map[int]*os.File // reservations of this process, kept open until exit
	lockD string
}

// FreePort returns a TCP port on 127.0.0.1 that is free now, outside the kernel's ephemeral
// range, and reserved for this process.
func FreePort() (int, error) {
	ports.mu.Lock()
	defer ports.mu.Unlock()
	if ports.held == nil {
		ports.held = map[int]*os.File{}
		// One directory per user: a directory another user created (mode 0755 after their umask)
		// would refuse this user's lock files, as a root run followed by a non-root `make test`
		// showed. Two users running the suite at once may still pick one port; a bind then fails.
		ports.lockD = filepath.Join(os.TempDir(), fmt.Sprintf("nodeaddr-test-ports-%d", os.Getuid()))
		if err := os.MkdirAll(ports.lockD, 0o700); err != nil {
			return 0, err
		}
	}
	lo, hi := portWindow()
	for range 200 {
		port := lo + rand.IntN(hi-lo)
		if _, mine := ports.held[port]; mine {
			continue
		}
		f, ok, err := reservePort(ports.lockD, port)
		if err != nil {
			return 0, err
		}
		if !ok {
			continue
		}
		if !portFree(port) {
			f.Close()
			continue
		}
		ports.held[port] = f
		return port, nil
	}
	return 0, fmt.Errorf("no free port found in %d-%d after 200 tries", lo, hi)
}

// portWindow is the range FreePort picks from: up to 12000 ports just below the start of
// net.ipv4.ip_local_port_range (32768 by default), never below 10000.
func portWindow() (lo, hi int) {
	hi = 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil && n > 11000 {
				hi = n
			}
		}
	}
	lo = max(10000, hi-12000)
	return lo, hi
}

// reservePort takes an exclusive, non-blocking flock on dir/<port>; ok is false when another
// process holds it.
func reservePort(dir string, port int) (*os.File, bool, error) {
	f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(port)), os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return nil, false, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, false, nil
		}
		return nil, false, fmt.Errorf("reserve port %d: %w", port, err)
	}
	return f, true, nil
}

// portFree reports whether nothing listens on 127.0.0.1:port (a server started outside the tests,
// or a test process that did not use FreePort).
func portFree(port int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return false
	}
	l.Close()
	return true
}
