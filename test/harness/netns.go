package harness

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netns"

	"github.com/nodeaddr/nodeaddr/internal/netnstest"
)

// SkipOrFail skips t loudly with the reason, or fails it when NODEADDR_E2E=require (CI sets it),
// and records the skip for make test's summary: internal/netnstest.SkipOrFail, shared with the
// main module's kernel tests.
func SkipOrFail(t testing.TB, format string, args ...any) {
	t.Helper()
	netnstest.SkipOrFail(t, fmt.Sprintf(format, args...))
}

// Tool returns the path of a command-line tool, looked up in PATH and in /usr/sbin and /sbin (root's
// tools, missing from some PATHs), or skips t saying which Debian package provides it (fails
// under NODEADDR_E2E=require; .ci/run installs the packages the tests need).
func Tool(t testing.TB, name, pkg string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, dir := range []string{"/usr/sbin", "/sbin"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			return filepath.Join(dir, name)
		}
	}
	SkipOrFail(t, "%s not found: install Debian's %s (apt-get install -y %s)", name, pkg, pkg)
	return ""
}

// RequireE2E skips t unless it can run end-to-end (root and iproute2), or fails it when
// NODEADDR_E2E=require (CI), so a missing tool never hides behind a skip. It records that an
// end-to-end test ran, for MainE2E's check.
func RequireE2E(t testing.TB) {
	t.Helper()
	reason := ""
	if os.Geteuid() != 0 {
		reason = "not root: end-to-end tests create network namespaces"
	} else if _, err := exec.LookPath("ip"); err != nil {
		reason = "iproute2's ip command not found"
	}
	if reason != "" {
		SkipOrFail(t, "end-to-end test cannot run: %s", reason)
	}
	ranMu.Lock()
	ran++
	ranMu.Unlock()
}

var (
	ranMu sync.Mutex
	ran   int
)

// MainE2E runs the tests and, under NODEADDR_E2E=require, fails the run when no end-to-end test
// executed (a filter or a build tag that silently excludes them all).
func MainE2E(m *testing.M) int {
	code := m.Run()
	if code == 0 && os.Getenv("NODEADDR_E2E") == "require" {
		ranMu.Lock()
		n := ran
		ranMu.Unlock()
		if n == 0 && !strings.Contains(strings.Join(os.Args, " "), "-test.list") {
			fmt.Fprintln(os.Stderr, "NODEADDR_E2E=require but no end-to-end test executed")
			return 1
		}
	}
	return code
}

// Netns is a network namespace acting as a host.
type Netns struct {
	Name string
	t    testing.TB
}

// NewNetns creates a namespace with lo up, deleted when t ends.
func NewNetns(t testing.TB, prefix string) *Netns {
	t.Helper()
	b := make([]byte, 3)
	rand.Read(b)
	name := fmt.Sprintf("na-%s-%x", prefix, b)
	run(t, "ip", "netns", "add", name)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", name).Run() })
	ns := &Netns{Name: name, t: t}
	ns.IP("link", "set", "lo", "up")
	return ns
}

// IP runs `ip args...` in the namespace and fails the test on error.
func (n *Netns) IP(args ...string) {
	n.t.Helper()
	run(n.t, "ip", append([]string{"-n", n.Name}, args...)...)
}

// TryIP runs `ip args...` in the namespace and returns its error.
func (n *Netns) TryIP(args ...string) error {
	out, err := exec.Command("ip", append([]string{"-n", n.Name}, args...)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return nil
}

// Batch runs `ip -batch -` with the given commands in the namespace.
func (n *Netns) Batch(lines []string) {
	n.t.Helper()
	cmd := exec.Command("ip", "-n", n.Name, "-batch", "-")
	cmd.Stdin = strings.NewReader(strings.Join(lines, "\n") + "\n")
	if out, err := cmd.CombinedOutput(); err != nil {
		n.t.Fatalf("ip -batch: %v: %s", err, out)
	}
}

// Sysctl sets a sysctl inside the namespace.
func (n *Netns) Sysctl(key, value string) {
	n.t.Helper()
	run(n.t, "ip", "netns", "exec", n.Name, "sysctl", "-qw", key+"="+value)
}

// Exec returns a command that runs inside the namespace.
func (n *Netns) Exec(name string, args ...string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", n.Name, name}, args...)...)
}

// Link connects this namespace to peer with a veth pair: dev here, peerDev there, both up.
func (n *Netns) Link(dev string, peer *Netns, peerDev string) {
	n.t.Helper()
	n.IP("link", "add", dev, "type", "veth", "peer", "name", peerDev, "netns", peer.Name)
	n.IP("link", "set", dev, "up")
	peer.IP("link", "set", peerDev, "up")
}

// do runs f on an OS thread switched into the namespace.
func (n *Netns) do(f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		// The thread is left locked (and so discarded when the goroutine ends) if switching back
		// fails, so no other goroutine ever runs in the wrong namespace.
		orig, err := netns.Get()
		if err != nil {
			errc <- err
			return
		}
		defer orig.Close()
		target, err := netns.GetFromName(n.Name)
		if err != nil {
			errc <- err
			return
		}
		defer target.Close()
		if err := netns.Set(target); err != nil {
			errc <- err
			return
		}
		ferr := f()
		if err := netns.Set(orig); err != nil {
			errc <- fmt.Errorf("switch back: %w", err)
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// Listen opens a TCP listener inside the namespace.
func (n *Netns) Listen(addr string) (net.Listener, error) {
	var l net.Listener
	err := n.do(func() (err error) { l, err = net.Listen("tcp", addr); return })
	return l, err
}

// Dial connects to addr from inside the namespace.
func (n *Netns) Dial(ctx context.Context, addr string) (net.Conn, error) {
	var c net.Conn
	err := n.do(func() (err error) {
		var d net.Dialer
		c, err = d.DialContext(ctx, "tcp", addr)
		return
	})
	return c, err
}

// HTTPClient returns a client whose connections are made inside the namespace.
func (n *Netns) HTTPClient() *http.Client {
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext:       func(ctx context.Context, _, addr string) (net.Conn, error) { return n.Dial(ctx, addr) },
		DisableKeepAlives: true,
	}}
}

// Relay listens on 127.0.0.1:port inside the namespace and forwards each connection to target on
// the host's loopback: a process inside the namespace reaches the API server as if it were local,
// and nothing leaves loopback. It stops when t ends.
func (n *Netns) Relay(port int, target string) {
	n.t.Helper()
	n.RelayAt(fmt.Sprintf("127.0.0.1:%d", port), target)
}

// RelayAt is Relay listening on addr (IP:port) inside the namespace. The listener is bound with
// IP_FREEBIND, so addr may be an address the namespace gets only later (a bridge's gateway that the
// CNI plugin adds with the first pod): connections are accepted once it exists.
func (n *Netns) RelayAt(addr, target string) {
	n.t.Helper()
	var l net.Listener
	err := n.do(func() (err error) {
		lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
			var serr error
			if err := c.Control(func(fd uintptr) {
				serr = syscall.SetsockoptInt(int(fd), syscall.SOL_IP, syscall.IP_FREEBIND, 1)
			}); err != nil {
				return err
			}
			return serr
		}}
		l, err = lc.Listen(context.Background(), "tcp", addr)
		return
	})
	if err != nil {
		n.t.Fatalf("relay listen on %s in %s: %v", addr, n.Name, err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	conns := map[net.Conn]bool{}
	n.t.Cleanup(func() {
		l.Close()
		mu.Lock()
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				up, err := net.DialTimeout("tcp", target, 5*time.Second)
				if err != nil {
					c.Close()
					return
				}
				mu.Lock()
				conns[c], conns[up] = true, true
				mu.Unlock()
				var pw sync.WaitGroup
				pw.Go(func() { io.Copy(up, c); up.(*net.TCPConn).CloseWrite() })
				pw.Go(func() { io.Copy(c, up); c.(*net.TCPConn).CloseWrite() })
				pw.Wait()
				c.Close()
				up.Close()
				mu.Lock()
				delete(conns, c)
				delete(conns, up)
				mu.Unlock()
			})
		}
	})
}

func run(t testing.TB, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v: %s", name, strings.Join(args, " "), err, out)
	}
}
