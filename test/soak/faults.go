package soak

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os/exec"
	"slices"
	"strconv"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

// fault is one kind of fault: what it needs to itself (faults sharing a resource never overlap),
// how often the schedule picks it, and what it does (it undoes itself before returning).
type fault struct {
	name     string
	resource string // "link" faults get a link chosen at schedule time
	weight   int
	run      func(s *soak, r *rand.Rand, u uplink)
}

// faults are the soak's faults (pressure.go has the pressure fault). There are two partitions: the relay's (bytes held in the relay,
// both ways) and nftables' (packets dropped in the node's namespace).
var faults = []fault{
	{"renumber-make-before-break", "link", 6, renumberMBB},
	{"renumber-break-before-make", "link", 5, renumberBBM},
	{"secondary-address", "link", 3, secondary},
	{"deprecated-address", "link", 3, deprecate},
	{"link-down-up", "link", 4, linkDown},
	{"carrier-flap-storm", "link", 3, flapStorm},
	{"route-flood", "agent", 1, routeFlood},
	{"apiserver-restart", "apiserver", 3, apiRestart},
	{"etcd-restart", "etcd", 2, etcdRestart},
	{"partition", "relay", 3, partition},
	{"partition-nftables", "nft", 3, nftPartition},
	{"dhcp-lease-change", "dhcp", 3, dhcpLease},
	{"agent-sigkill", "agent", 3, sigkill},
	{"agent-sigstop", "agent", 3, sigstop},
	{"writer-burst", "writer", 2, writerBurst},
	{"kubelet-reverter", "reverter", 2, reverter},
	{"node-recreate", "node", 1, recreate},
	{"ra-renumber-make-before-break", "ra", 5, raRenumberMBB},
	{"ra-flash-renumbering", "ra", 4, raFlash},
	{"ipv6-privacy-rotation", "tempaddr", 4, privacyRotation},
	{"dhcpv6-lease-change", "dhcp6", 3, dhcp6Lease},
	{"cpu-io-pressure", "pressure", 4, pressure},
}

func dur(r *rand.Rand, lo, hi time.Duration) time.Duration {
	return lo + time.Duration(r.Int64N(int64(hi-lo)+1))
}

// freeHost picks a host number on u's subnet that the node does not have (not the gateway, nor
// the kubelet-like reverter's address).
func (s *soak) freeHost(r *rand.Rand, u uplink) string {
	k := readKernel(s.w.ns.Name)
	for {
		ip := u.prefix + strconv.Itoa(2+r.IntN(240))
		if ip == kubeletIP || k.has(ip) {
			continue
		}
		return ip
	}
}

// primary returns one global primary address of u's link ("" when it has none).
func (s *soak) primary(u uplink) string {
	for _, a := range readKernel(s.w.ns.Name).Addrs {
		if a.Dev == u.dev && a.Family == "inet" && a.Scope == "global" && !a.Secondary {
			return a.Local
		}
	}
	return ""
}

// ip changes the node's namespace and samples the kernel right after, so that the timeline has
// every state the soak itself made (the periodic sampler may miss a short one).
func (s *soak) ip(args ...string) {
	s.w.ns.TryIP(args...)
	s.timeline.add(readKernel(s.w.ns.Name))
}

func renumberMBB(s *soak, r *rand.Rand, u uplink) {
	old, next := s.primary(u), s.freeHost(r, u)
	s.ip("addr", "add", next+"/24", "dev", u.dev)
	time.Sleep(dur(r, 0, 800*time.Millisecond)) // fault window: both addresses
	if old != "" {
		s.ip("addr", "del", old+"/24", "dev", u.dev)
	}
	s.rec.event("kernel", "%s: %s -> %s (make-before-break)", u.dev, old, next)
}

func renumberBBM(s *soak, r *rand.Rand, u uplink) {
	old, next := s.primary(u), s.freeHost(r, u)
	if old != "" {
		s.ip("addr", "del", old+"/24", "dev", u.dev)
	}
	gap := dur(r, 100*time.Millisecond, 7*time.Second)
	s.rec.event("kernel", "%s: %s deleted, %s in %s (break-before-make)", u.dev, old, next, gap)
	time.Sleep(gap) // fault window: no address
	s.ip("addr", "add", next+"/24", "dev", u.dev)
	s.restoreRoutes(u)
}

func secondary(s *soak, r *rand.Rand, u uplink) {
	ip := s.freeHost(r, u)
	s.ip("addr", "add", ip+"/24", "dev", u.dev)
	s.rec.event("kernel", "%s: secondary %s added", u.dev, ip)
	time.Sleep(dur(r, time.Second, 8*time.Second)) // fault window: the secondary present
	s.ip("addr", "del", ip+"/24", "dev", u.dev)
}

func deprecate(s *soak, r *rand.Rand, u uplink) {
	ip := s.primary(u)
	if ip == "" {
		return
	}
	s.ip("addr", "change", ip+"/24", "dev", u.dev, "preferred_lft", "0")
	d := dur(r, 500*time.Millisecond, 9*time.Second)
	s.rec.event("kernel", "%s: %s deprecated for %s", u.dev, ip, d)
	time.Sleep(d) // fault window: deprecated
	s.ip("addr", "change", ip+"/24", "dev", u.dev, "preferred_lft", "forever")
}

func linkDown(s *soak, r *rand.Rand, u uplink) {
	d := dur(r, 300*time.Millisecond, 8*time.Second)
	s.rec.event("kernel", "%s down for %s", u.dev, d)
	s.ip("link", "set", u.dev, "down")
	time.Sleep(d) // fault window: the link down
	s.ip("link", "set", u.dev, "up")
	s.restoreRoutes(u)
}

// flapStorm flaps the router side's carrier of u's link 10 to 60 times, 30 ms down and 30 ms up,
// through one `ip -batch` process (no command to start per flap), and measures each carrier-down
// phase from before the down command to after the up command's acknowledgement. A phase that may
// have lasted the agent's link hold is a state the agent may publish (twice: there and back);
// on a busy machine the "30 ms" phases last hundreds, and invariant 5 allows them.
func flapStorm(s *soak, r *rand.Rand, u uplink) {
	n := 10 + r.IntN(50)
	dev := "r-" + u.dev
	b, err := startIPBatch(s.w.rtr.Name)
	if err != nil {
		s.rec.event("kernel", "%s carrier storm not started: %v", dev, err)
		return
	}
	defer b.close()
	var phases []time.Duration
	for range n {
		from := time.Now()
		if b.do("link set "+dev+" down", dev) != nil {
			break
		}
		time.Sleep(30 * time.Millisecond) // fault window: carrier down for 30 ms
		err := b.do("link set "+dev+" up", dev)
		phases = append(phases, time.Since(from))
		if err != nil {
			break
		}
		time.Sleep(30 * time.Millisecond) // fault window: carrier up for 30 ms
	}
	held := heldPhases(phases, linkHold)
	s.rec.event("kernel", "%s carrier flapped %d times; %d carrier-down phases may have lasted the link hold (longest %s)",
		dev, len(phases), held, slices.Max(append(phases, 0)).Round(time.Millisecond))
	s.mu.Lock()
	s.held += held
	s.mu.Unlock()
}

// heldPhases counts the carrier-down phases that may have lasted hold or longer.
func heldPhases(phases []time.Duration, hold time.Duration) int {
	n := 0
	for _, p := range phases {
		if p >= hold {
			n++
		}
	}
	return n
}

// ipBatch is one `ip -batch -` process in a namespace: each command is acknowledged by a `link
// show` of the device it changes, so the caller knows when the kernel has done it.
type ipBatch struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Scanner
}

func startIPBatch(ns string) (*ipBatch, error) {
	cmd := exec.Command("ip", "-n", ns, "-o", "-force", "-batch", "-")
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return &ipBatch{cmd: cmd, in: in, out: bufio.NewScanner(out)}, nil
}

// do runs one command and waits for the acknowledgement (the device's line).
func (b *ipBatch) do(command, dev string) error {
	if _, err := fmt.Fprintf(b.in, "%s\nlink show dev %s\n", command, dev); err != nil {
		return err
	}
	if !b.out.Scan() {
		return fmt.Errorf("ip -batch ended: %v", b.out.Err())
	}
	return nil
}

func (b *ipBatch) close() {
	b.in.Close()
	b.cmd.Wait()
}

// routeFlood adds and removes 20 000 routes while the agent is frozen, so the route subscription
// overflows (ENOBUFS) and the agent resubscribes.
func routeFlood(s *soak, r *rand.Rand, _ uplink) {
	add, del := harness.RouteBatch(20000, uplinks[0].gw, uplinks[0].dev)
	a := s.w.currentAgent()
	from := time.Now()
	a.Signal(syscall.SIGSTOP)
	s.batch(add)
	a.Signal(syscall.SIGCONT)
	s.rec.stall(from, time.Now())
	s.batch(del)
}

func (s *soak) batch(lines []string) {
	cmd := s.w.ns.Exec("ip", "-force", "-batch", "-")
	cmd.Stdin = stringsReader(lines)
	cmd.Run()
}

func apiRestart(s *soak, r *rand.Rand, _ uplink) {
	d := dur(r, time.Second, 15*time.Second)
	s.rec.event("control", "kube-apiserver down for %s", d)
	s.w.cp.StopAPIServer()
	time.Sleep(d) // fault window: the API server down
	s.startAPIServer()
}

// restartBound is how long the soak retries bringing a control-plane process or the Node back.
const restartBound = 2 * time.Minute

func (s *soak) startAPIServer() {
	attempt := 0
	err := harness.Poll(restartBound, time.Second, "kube-apiserver started", func() (bool, string) {
		attempt++
		err := s.w.cp.StartAPIServer(context.Background())
		if err != nil {
			s.rec.event("control", "kube-apiserver start failed (attempt %d): %v", attempt, err)
			s.w.cp.StopAPIServer()
		}
		return err == nil, fmt.Sprint(err)
	})
	if err != nil {
		s.rec.violate(0, "the soak could not restart the API server: %v", err)
	}
}

func etcdRestart(s *soak, r *rand.Rand, _ uplink) {
	d := dur(r, time.Second, 8*time.Second)
	s.rec.event("control", "etcd down for %s", d)
	s.w.cp.StopEtcd()
	time.Sleep(d) // fault window: etcd down
	err := harness.Poll(restartBound, time.Second, "etcd started", func() (bool, string) {
		err := s.w.cp.StartEtcd()
		if err != nil {
			s.w.cp.StopEtcd()
		}
		return err == nil, fmt.Sprint(err)
	})
	if err != nil {
		s.rec.violate(0, "the soak could not restart etcd: %v", err)
	}
}

func partition(s *soak, r *rand.Rand, _ uplink) {
	d := dur(r, time.Second, 20*time.Second)
	s.rec.event("network", "agent partitioned from the API server for %s", d)
	from := time.Now()
	s.w.relay.partition()
	time.Sleep(d) // fault window: partitioned
	s.w.relay.heal()
	s.rec.stall(from, time.Now())
}

func sigkill(s *soak, r *rand.Rand, _ uplink) {
	s.w.killAgent(dur(r, 0, 3*time.Second))
}

func sigstop(s *soak, r *rand.Rand, _ uplink) {
	d := dur(r, 500*time.Millisecond, 10*time.Second)
	a := s.w.currentAgent()
	s.rec.event("agent", "SIGSTOP for %s", d)
	from := time.Now()
	a.Signal(syscall.SIGSTOP)
	time.Sleep(d) // fault window: stopped
	a.Signal(syscall.SIGCONT)
	s.rec.stall(from, time.Now())
}

func writerBurst(s *soak, r *rand.Rand, _ uplink) {
	d := dur(r, 2*time.Second, 8*time.Second)
	s.writer.burst(d)
	time.Sleep(d) // fault window: the burst
}

func reverter(s *soak, r *rand.Rand, _ uplink) {
	n := revert(s.w.admin, s.writer, dur(r, 2*time.Second, 12*time.Second))
	s.rec.event("writer", "kubelet-like reverter replaced the addresses %d times", n)
	s.mu.Lock()
	s.reverts += n
	s.mu.Unlock()
}

// recreate deletes the Node and registers it again, as a reinstalled kubelet does.
func recreate(s *soak, r *rand.Rand, _ uplink) {
	s.writer.lock()
	defer s.writer.unlock()
	// The API server may be down (another fault of the cycle): retry until restartBound.
	if err := harness.Poll(restartBound, time.Second, "Node deleted", func() (bool, string) {
		err := s.w.admin.CoreV1().Nodes().Delete(context.Background(), nodeName, metav1.DeleteOptions{})
		return err == nil || apierrors.IsNotFound(err), fmt.Sprint(err)
	}); err != nil {
		s.rec.violate(0, "the soak could not delete the Node: %v", err)
		return
	}
	time.Sleep(dur(r, 200*time.Millisecond, 3*time.Second)) // fault window: no Node
	if err := harness.Poll(restartBound, 500*time.Millisecond, "Node created", func() (bool, string) {
		err := s.w.createNode()
		return err == nil, fmt.Sprint(err)
	}); err != nil {
		s.rec.violate(0, "the soak could not recreate the Node: %v", err)
		return
	}
	s.writer.label, s.writer.cond, s.writer.dns = 0, 0, false
}

func (u uplink) String() string { return fmt.Sprintf("%s(%s0/24)", u.dev, u.prefix) }
