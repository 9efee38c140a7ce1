package soak

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"
)

// The oracle. It shares no code with nodeaddr: it reads the kernel with iproute2's JSON output and
// restates the flags' policy as simply as it can (docs/configuration.md, "Selection policy"):
//
//   - a candidate is the source address of the kernel's route toward the type's target;
//   - it must be a global-scope address on a non-excluded interface that is not deprecated (or
//     preferred lifetime 0), tentative, optimistic or DAD-failed, nor an IPv4 secondary or an IPv6
//     temporary (privacy) address;
//   - an IPv6 route source that is a temporary address stands for the stable address of its prefix
//     (same interface, prefix and length; the mngtmpaddr one first), which is then the candidate;
//   - InternalIP is never an address of eth4 (--internal-ip-exclude-interfaces, dhcp6.go);
//   - InternalIP is managed per family (IPv4 toward internalTarget, IPv6 toward target6) and
//     sticky: the Node's current InternalIP of a family stays while the host still has it as an
//     address the policy accepts, so either it or the route source is right;
//   - ExternalIP follows the route toward externalTarget and externalTarget6 (the same temporary
//     rule); an ExternalIP equal to an InternalIP of the Node is dropped
//     (--external-ip-equal-internal=drop).

// kaddr is one address as `ip -j addr` reports it.
type kaddr struct {
	Family     string `json:"family"`
	Local      string `json:"local"`
	Prefixlen  int    `json:"prefixlen"`
	Scope      string `json:"scope"`
	Label      string `json:"label"`
	Secondary  bool   `json:"secondary"`
	Deprecated bool   `json:"deprecated"`
	Tentative  bool   `json:"tentative"`
	Optimistic bool   `json:"optimistic"`
	DADFailed  bool   `json:"dadfailed"`
	Temporary  bool   `json:"temporary"`  // IPv6 privacy address (the flag IPv4 calls secondary)
	MngTmpAddr bool   `json:"mngtmpaddr"` // the stable address temporary ones are made from
	Preferred  *int64 `json:"preferred_life_time"`
	Dev        string `json:"-"`
}

// usable restates the policy for one address.
func (a kaddr) usable() bool {
	ok := a.Scope == "global" && !a.Deprecated && !a.Tentative && !a.Optimistic && !a.DADFailed &&
		(a.Preferred == nil || *a.Preferred != 0) && a.Dev != "lo"
	switch a.Family {
	case "inet":
		return ok && !a.Secondary && (a.Label == "" || a.Label == a.Dev) && a.Prefixlen < 32
	case "inet6":
		return ok && !a.Temporary
	}
	return false
}

// prefix is the address's network ("" when it does not parse).
func (a kaddr) prefix() string {
	ip, err := netip.ParseAddr(a.Local)
	if err != nil {
		return ""
	}
	p, err := ip.Prefix(a.Prefixlen)
	if err != nil {
		return ""
	}
	return p.String()
}

// sample is the kernel's state at one moment. At is when the state began as far as the oracle can
// tell: when its read began, or earlier, when the kernel notified a change since the previous
// sample and none during the read (kernelTimeline.add).
type sample struct {
	At       time.Time
	Read     time.Time // when the read began (At before any stamping from a notification)
	Done     time.Time // when the read ended
	Addrs    []kaddr
	Internal string // route source toward internalTarget ("" without a route)
	External string
	// Internal6 is the route source toward target6 as the kernel picks it ("" without a route):
	// with privacy extensions, a temporary address (source6 maps it to its stable address).
	Internal6 string
	External6 string // the route source toward externalTarget6, as the kernel picks it
	Err       error
}

// usableSet returns the usable addresses.
func (s sample) usableSet() []string {
	var out []string
	for _, a := range s.Addrs {
		if a.usable() {
			out = append(out, a.Local)
		}
	}
	return out
}

func (s sample) isUsable(ip string) bool { return slices.Contains(s.usableSet(), ip) }

func (s sample) find(ip string) (kaddr, bool) {
	i := slices.IndexFunc(s.Addrs, func(a kaddr) bool { return a.Local == ip })
	if i < 0 {
		return kaddr{}, false
	}
	return s.Addrs[i], true
}

// source6 is the IPv6 InternalIP candidate from the route: the route source itself, or, when that
// is a temporary address, the usable stable address of its prefix on its interface (the
// mngtmpaddr one first, else the first in kernel order); the temporary address itself (which is
// not usable) when there is none.
func (s sample) source6() string { return s.stableFor(s.Internal6) }

// stableFor is source6's rule for any route source ip.
func (s sample) stableFor(ip string) string {
	src, ok := s.find(ip)
	if !ok || src.Family != "inet6" || !src.Temporary {
		return ip
	}
	pfx := src.prefix()
	var found []kaddr
	for _, a := range s.Addrs {
		if a.Family == "inet6" && a.Dev == src.Dev && a.Prefixlen == src.Prefixlen && a.prefix() == pfx && a.usable() {
			found = append(found, a)
		}
	}
	if i := slices.IndexFunc(found, func(a kaddr) bool { return a.MngTmpAddr }); i >= 0 {
		return found[i].Local
	}
	if len(found) > 0 {
		return found[0].Local
	}
	return ip
}

// internal4 and internal6 are the route's InternalIP candidate of each family ("" for a source on
// an excluded interface).
func (s sample) internal4() string { return s.internalOnly(s.Internal) }
func (s sample) internal6() string { return s.internalOnly(s.source6()) }

func (s sample) internalOnly(ip string) string {
	if a, ok := s.find(ip); ok && a.Dev == dhcp6Dev {
		return ""
	}
	return ip
}

func (s sample) String() string {
	var b strings.Builder
	for _, a := range s.Addrs {
		if a.Scope != "global" || (a.Family != "inet" && a.Family != "inet6") {
			continue
		}
		fmt.Fprintf(&b, "%s/%d@%s", a.Local, a.Prefixlen, a.Dev)
		if a.Secondary {
			b.WriteString("(sec)")
		}
		if a.Temporary {
			b.WriteString("(temp)")
		}
		if a.Tentative || a.Optimistic {
			b.WriteString("(tent)")
		}
		if a.DADFailed {
			b.WriteString("(dadfailed)")
		}
		if a.Deprecated || (a.Preferred != nil && *a.Preferred == 0) {
			b.WriteString("(depr)")
		}
		b.WriteString(" ")
	}
	fmt.Fprintf(&b, "route[int]=%s route[ext]=%s", orNone(s.Internal), orNone(s.External))
	if s.Internal6 != "" || s.External6 != "" {
		fmt.Fprintf(&b, " route[int6]=%s route[ext6]=%s", orNone(s.Internal6), orNone(s.External6))
	}
	return b.String()
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// expectation is the oracle's verdict for one kernel sample and the Node's current addresses.
type expectation struct {
	Internal  []string // acceptable IPv4 InternalIPs (empty: the Node must have none)
	Internal6 []string // acceptable IPv6 InternalIPs (empty: the Node must have none)
	External  string   // the IPv4 ExternalIP ("" : none)
	// External6 are the acceptable IPv6 ExternalIPs (empty: none): the route's stable source, and
	// the Node's current one while usable on the same link (among one link's addresses the
	// kernel's choice is no decision: the newest wins).
	External6 []string
}

// expect computes what the Node must show given the kernel sample s and the Node's current
// InternalIP of each family and IPv6 ExternalIP (for stickiness; "" when it has none).
func expect(s sample, nodeInternal, nodeInternal6, nodeExternal6 string) expectation {
	var e expectation
	e.Internal = sticky(s, s.internal4(), nodeInternal)
	e.Internal6 = sticky(s, s.internal6(), nodeInternal6)
	if s.External != "" && s.isUsable(s.External) {
		e.External = s.External
	}
	if ext6 := s.stableFor(s.External6); ext6 != "" && s.isUsable(ext6) {
		e.External6 = []string{ext6}
		src, _ := s.find(ext6)
		if cur, ok := s.find(nodeExternal6); ok && cur.Local != ext6 && cur.Dev == src.Dev && s.isUsable(cur.Local) {
			e.External6 = append(e.External6, cur.Local)
		}
	}
	return e
}

// sticky is one family's acceptable InternalIPs: the route's candidate src when usable, and the
// Node's current address cur while usable.
func sticky(s sample, src, cur string) []string {
	var out []string
	if src != "" && s.isUsable(src) {
		out = append(out, src)
	}
	if cur != "" && cur != src && s.isUsable(cur) && s.internalOnly(cur) != "" {
		out = append(out, cur)
	}
	return out
}

// readKernel samples the namespace's addresses (both families) and the three route lookups.
func readKernel(ns string) sample {
	s := sample{At: time.Now()}
	s.Read = s.At
	targets := []string{internalTarget, externalTarget, target6, externalTarget6}
	addrs, routes, err := readerFor(ns).read(targets)
	if err != nil {
		s.Err = err
		return s
	}
	var links []struct {
		Ifname   string  `json:"ifname"`
		AddrInfo []kaddr `json:"addr_info"`
	}
	if err := json.Unmarshal(addrs, &links); err != nil {
		s.Err = fmt.Errorf("ip addr json: %v", err)
		return s
	}
	for _, l := range links {
		for _, a := range l.AddrInfo {
			a.Dev = l.Ifname
			s.Addrs = append(s.Addrs, a)
		}
	}
	s.Internal, s.External = routes[internalTarget], routes[externalTarget]
	s.Internal6, s.External6 = routes[target6], routes[externalTarget6]
	s.Done = time.Now()
	return s
}

// ipReader is one `ip -json -batch -` process in a namespace that answers the oracle's reads: the
// address list and one `route get` per target, then `link show dev lo` to mark the end (a route
// get without a route prints nothing on stdout). Starting five ip commands per read took up to
// seconds on a starved machine; one process that only reads is as quick as the kernel.
type ipReader struct {
	ns  string
	mu  sync.Mutex
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Scanner
}

var (
	readersMu sync.Mutex
	readers   = map[string]*ipReader{}
)

func readerFor(ns string) *ipReader {
	readersMu.Lock()
	defer readersMu.Unlock()
	r, ok := readers[ns]
	if !ok {
		r = &ipReader{ns: ns}
		readers[ns] = r
	}
	return r
}

// closeReader ends the namespace's reader (at the end of a test).
func closeReader(ns string) {
	readersMu.Lock()
	r := readers[ns]
	delete(readers, ns)
	readersMu.Unlock()
	if r != nil {
		r.mu.Lock()
		r.stop()
		r.mu.Unlock()
	}
}

func (r *ipReader) stop() {
	if r.cmd != nil {
		r.in.Close()
		r.cmd.Process.Kill()
		r.cmd.Wait()
		r.cmd = nil
	}
}

// read returns `ip -j addr show`'s output and each target's route source ("" without a route).
func (r *ipReader) read(targets []string) ([]byte, map[string]string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd == nil {
		cmd := exec.Command("ip", "-n", r.ns, "-j", "-force", "-batch", "-")
		in, err := cmd.StdinPipe()
		if err != nil {
			return nil, nil, err
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			return nil, nil, err
		}
		if err := cmd.Start(); err != nil {
			return nil, nil, fmt.Errorf("ip -batch: %v", err)
		}
		r.cmd, r.in, r.out = cmd, in, bufio.NewScanner(out)
		r.out.Buffer(make([]byte, 1<<20), 16<<20)
	}
	var b strings.Builder
	b.WriteString("addr show\n")
	for _, t := range targets {
		fmt.Fprintf(&b, "route get %s\n", t)
	}
	b.WriteString("link show dev lo\n")
	if _, err := io.WriteString(r.in, b.String()); err != nil {
		r.stop()
		return nil, nil, fmt.Errorf("ip -batch: %v", err)
	}
	var addrs []byte
	routes := map[string]string{}
	for {
		if !r.out.Scan() {
			r.stop()
			return nil, nil, fmt.Errorf("ip -batch ended: %v", r.out.Err())
		}
		line := r.out.Bytes()
		var objs []map[string]any
		if json.Unmarshal(line, &objs) != nil {
			continue
		}
		switch {
		case len(objs) > 0 && objs[0]["addr_info"] != nil:
			addrs = slices.Clone(line)
		case len(objs) > 0 && objs[0]["dst"] != nil:
			dst, _ := objs[0]["dst"].(string)
			src, _ := objs[0]["prefsrc"].(string)
			routes[dst] = src
		case len(objs) > 0 && objs[0]["ifname"] == "lo":
			if addrs == nil {
				return nil, nil, fmt.Errorf("ip -batch: no address list")
			}
			return addrs, routes, nil
		}
	}
}

// kernelTimeline samples the kernel continuously; invariant 2 asks it what the host had when.
//
// A sample stamped when the oracle got around to reading is late on a busy machine: its five `ip`
// commands can take a second to start, and an address that completed duplicate address detection
// just before the agent published it showed up in the timeline only after the write. So
// the timeline also follows the kernel's own notifications (`ip monitor`, one process that only
// reads a netlink socket): a notification triggers a sample, and a sample during whose read no
// further notification came is stamped with the time of the last notification, the moment the
// kernel told of the change it shows (never earlier than the change itself).
type kernelTimeline struct {
	mu      sync.Mutex
	samples []sample
	notes   []time.Time // when the kernel's notifications arrived, in order
	kick    chan struct{}
	// restamped counts the samples stamped from a notification, and lag is the longest of those
	// reads' delays after it (what the old stamping would have been late by).
	restamped int
	lag       time.Duration
}

func newKernelTimeline() *kernelTimeline { return &kernelTimeline{kick: make(chan struct{}, 1)} }

// note records a kernel notification received at and asks the sampler for a sample.
func (k *kernelTimeline) note(at time.Time) {
	k.mu.Lock()
	k.notes = append(k.notes, at)
	k.mu.Unlock()
	select {
	case k.kick <- struct{}{}:
	default:
	}
}

// stamp moves s.At back to the last notification before the read when no notification arrived
// during it (the state read is the one that notification told of) and that notification came
// after the previous sample (else that sample already shows the state). Called with k.mu held.
func (k *kernelTimeline) stamp(s sample) sample {
	after := func(t time.Time) int {
		i, _ := slices.BinarySearchFunc(k.notes, t, func(x, t time.Time) int {
			if x.After(t) {
				return 1
			}
			return -1
		})
		return i // the index of the first note after t
	}
	i := after(s.At)
	if i == 0 || (i < len(k.notes) && !k.notes[i].After(s.Done)) {
		return s
	}
	n := k.notes[i-1]
	j, _ := slices.BinarySearchFunc(k.samples, s.At, func(x sample, t time.Time) int { return x.At.Compare(t) })
	if j > 0 && !n.After(k.samples[j-1].At) {
		return s
	}
	k.restamped++
	k.lag = max(k.lag, s.At.Sub(n))
	s.At = n
	return s
}

// stamps says how many samples were stamped from notifications and the longest read delay.
func (k *kernelTimeline) stamps() (int, time.Duration) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.restamped, k.lag
}

func (k *kernelTimeline) add(s sample) {
	if s.Err != nil {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if !s.Done.IsZero() {
		s = k.stamp(s)
	}
	n := len(k.samples)
	if n > 0 && s.At.Before(k.samples[n-1].At) {
		// Sampled concurrently (the sampler and a fault) or stamped from a notification: keep
		// the timeline in time order.
		i, _ := slices.BinarySearchFunc(k.samples, s.At, func(x sample, t time.Time) int { return x.At.Compare(t) })
		k.samples = slices.Insert(k.samples, i, s)
		return
	}
	// Keep one sample per distinct state, plus its last confirmation.
	if n > 1 && k.samples[n-1].String() == s.String() && k.samples[n-2].String() == s.String() {
		k.samples[n-1] = s
		return
	}
	k.samples = append(k.samples, s)
}

// between returns the samples taken in [from, to], plus the last one before from (the state in
// force at from).
func (k *kernelTimeline) between(from, to time.Time) []sample {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []sample
	for i, s := range k.samples {
		if s.At.Before(from) {
			if i+1 < len(k.samples) && !k.samples[i+1].At.Before(from) {
				out = append(out, s)
			}
			continue
		}
		if s.At.After(to) {
			break
		}
		out = append(out, s)
	}
	return out
}

// betweenRead is between by when each read began, as the timeline stamped samples before it
// followed the kernel's notifications (for the summary's comparison; samples without a read
// time count at At).
func (k *kernelTimeline) betweenRead(from, to time.Time) []sample {
	k.mu.Lock()
	defer k.mu.Unlock()
	read := func(s sample) time.Time {
		if s.Read.IsZero() {
			return s.At
		}
		return s.Read
	}
	var out []sample
	var last *sample
	for i, s := range k.samples {
		r := read(s)
		switch {
		case r.Before(from):
			if last == nil || r.After(read(*last)) {
				last = &k.samples[i]
			}
		case !r.After(to):
			out = append(out, s)
		}
	}
	if last != nil {
		out = append([]sample{*last}, out...)
	}
	return out
}

// prune forgets samples older than before (the audit check is done with them).
func (k *kernelTimeline) prune(before time.Time) {
	k.mu.Lock()
	defer k.mu.Unlock()
	i := 0
	for i < len(k.samples)-1 && k.samples[i+1].At.Before(before) {
		i++
	}
	k.samples = slices.Clone(k.samples[i:])
	j := 0
	for j < len(k.notes) && k.notes[j].Before(before) {
		j++
	}
	k.notes = slices.Clone(k.notes[j:])
}

// run samples every period and after every kernel notification until stop is closed.
func (k *kernelTimeline) run(ns string, period time.Duration, stop <-chan struct{}) {
	mon := exec.Command("ip", "-n", ns, "monitor", "address", "link", "route")
	out, err := mon.StdoutPipe()
	if err == nil {
		err = mon.Start()
	}
	if err == nil {
		defer func() { mon.Process.Kill(); mon.Wait() }()
		go func() {
			sc := bufio.NewScanner(out)
			sc.Buffer(make([]byte, 64<<10), 1<<20)
			for sc.Scan() {
				k.note(time.Now())
			}
		}()
	} else {
		fmt.Printf("soak: ip monitor: %v (the timeline samples every %s only)\n", err, period)
	}
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		k.add(readKernel(ns))
		select {
		case <-stop:
			return
		case <-t.C:
		case <-k.kick:
		}
	}
}
