package soak

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

// The IPv6 uplink: eth3 is numbered by SLAAC from radvd (harness.Radvd, a real router daemon) on
// r-eth3 in the router's namespace, with privacy extensions on (use_tempaddr=2): the kernel's
// source toward target6 is a temporary address, and the InternalIP is the stable address of its
// prefix. addr_gen_mode is EUI-64 for even seeds and stable-privacy for odd ones. The router
// announces one prefix at a time, 2001:db8:N::/64, with short lifetimes (raPreferred, raValid) that
// each advertisement (every 3 to 4 s) renews: a withdrawn prefix's addresses are gone within
// raValid seconds, and a crashed router's within raPreferred deprecated. The oracle knows nothing of
// this: it reads the addresses, their flags and the route from the kernel like every other.
const (
	target6                  = "2001:4860:4860::8888" // only looked up in the node's routing table
	v6Dev, v6Peer, v6MAC     = "eth3", "r-eth3", "02:00:00:00:00:33"
	raPreferred, raValid     = 12, 18
	tempPreferred, tempValid = 86400, 604800 // the kernel's defaults: no rotation outside the fault
)

// ra6 is the router of the IPv6 uplink and the prefix it announces.
type ra6 struct {
	radvd *harness.Radvd
	n     int // the current prefix's number
	mode  int // eth3's addr_gen_mode
}

func prefix6(n int) string { return fmt.Sprintf("2001:db8:%x::/64", n) }

// advert is an advertisement of prefix n with the given lifetimes, followed by more.
func advert(n, preferred, valid int, more ...harness.Prefix6) harness.RA {
	return harness.RA{Prefixes: append([]harness.Prefix6{{Prefix: prefix6(n), Preferred: preferred, Valid: valid}}, more...)}
}

// startRA adds the IPv6 uplink and waits until the route toward target6 has a usable source.
func (s *soak) startRA() {
	t := s.t
	r := &ra6{n: 1, mode: []int{0, 3}[s.seed%2]}
	harness.LinkHost6(s.w.ns, v6Dev, v6MAC, s.w.rtr, v6Peer, harness.Host6{AddrGenMode: r.mode, UseTempaddr: 2})
	r.radvd = harness.StartRadvd(t, s.w.rtr, v6Peer, advert(r.n, raPreferred, raValid))
	if !s.wait6(time.Minute, func(k sample) bool { return k.isUsable(k.source6()) }) {
		t.Fatalf("no usable IPv6 route source on %s within 1m: %s", v6Dev, readKernel(s.w.ns.Name))
	}
	s.ra = r
	s.added++
	s.rec.event("ra", "%s numbered by SLAAC from %s (addr_gen_mode %d, use_tempaddr 2): %s", v6Dev,
		prefix6(r.n), r.mode, readKernel(s.w.ns.Name))
}

// wait6 samples the kernel (into the timeline) every 100 ms until cond holds or timeout passes,
// and reports whether it held.
func (s *soak) wait6(timeout time.Duration, cond func(sample) bool) bool {
	return harness.Poll(timeout, 100*time.Millisecond, "the IPv6 uplink's addresses", func() (bool, string) {
		k := readKernel(s.w.ns.Name)
		s.timeline.add(k)
		return k.Err == nil && cond(k), fmt.Sprint(k.Addrs, k.Err)
	}) == nil
}

// of6 returns eth3's global addresses in prefix n.
func (k sample) of6(n int) []kaddr {
	var out []kaddr
	for _, a := range k.Addrs {
		if a.Dev == v6Dev && a.Family == "inet6" && a.Scope == "global" && a.prefix() == prefix6(n) {
			out = append(out, a)
		}
	}
	return out
}

// stableIn reports whether eth3 has a usable stable (not temporary) address in prefix n.
func (k sample) stableIn(n int) bool {
	for _, a := range k.of6(n) {
		if !a.Temporary && a.usable() {
			return true
		}
	}
	return false
}

// deprecatedIn reports whether eth3 has no usable stable address left in prefix n.
func (k sample) deprecatedIn(n int) bool { return !k.stableIn(n) }

// raRenumberMBB renumbers as a router does make-before-break: the next prefix is announced beside
// the current one, then the current one is deprecated (preferred lifetime 0) and then withdrawn
// (valid lifetime 0: its addresses go when their remaining valid lifetime ends, RFC 4862 5.5.3e).
// The Node keeps its address while both prefixes are preferred and moves when the old is
// deprecated.
func raRenumberMBB(s *soak, r *rand.Rand, _ uplink) {
	if s.ra == nil {
		return
	}
	s.renumberRA(dur(r, 0, 3*time.Second), dur(r, 0, 2*time.Second))
}

// renumberRA is raRenumberMBB with both prefixes preferred for both, and the old one withdrawn
// hold after it was deprecated. It reports whether each step happened in the kernel.
func (s *soak) renumberRA(both, hold time.Duration) (usable, deprecated, gone bool) {
	ra := s.ra
	old, next := ra.n, ra.n+1
	fresh := harness.Prefix6{Prefix: prefix6(next), Preferred: raPreferred, Valid: raValid}
	s.announce(advert(old, raPreferred, raValid, fresh))
	usable = s.wait6(30*time.Second, func(k sample) bool { return k.stableIn(next) })
	s.rec.event("ra", "%s: %s announced beside %s (usable: %v), both preferred for %s", v6Dev, prefix6(next), prefix6(old), usable, both)
	time.Sleep(both) // fault window: both prefixes preferred
	s.announce(advert(old, 0, raValid, fresh))
	deprecated = s.wait6(30*time.Second, func(k sample) bool { return k.deprecatedIn(old) })
	s.rec.event("ra", "%s: %s deprecated (seen: %v), withdrawn in %s", v6Dev, prefix6(old), deprecated, hold)
	time.Sleep(hold) // fault window: the old prefix deprecated, not yet withdrawn
	s.announce(advert(old, 0, 0, fresh))
	gone = s.wait6((raValid+15)*time.Second, func(k sample) bool { return len(k.of6(old)) == 0 })
	s.announce(advert(next, raPreferred, raValid))
	ra.n = next
	s.report6("ra", "%s: %s -> %s make-before-break: new usable %v, old deprecated %v, old gone %v",
		v6Dev, prefix6(old), prefix6(next), usable, deprecated, gone)
	return usable, deprecated, gone
}

// report6 records an IPv6 fault's outcome and prints it (the soak's log shows what each did).
func (s *soak) report6(kind, format string, args ...any) {
	s.rec.event(kind, format, args...)
	fmt.Printf("soak: +%s %s: %s\n", s.rec.since(time.Now()), kind, fmt.Sprintf(format, args...))
}

// raFlash is flash renumbering: the router restarts with a new prefix and never deprecates the old
// one. One time in two a network manager deletes the old addresses at once (the removal grace
// holds the InternalIP until the new address is usable), else they live on until their
// lifetimes end (the Node moves when the old one is deprecated).
func raFlash(s *soak, r *rand.Rand, _ uplink) {
	if s.ra == nil {
		return
	}
	s.flashRA(r.IntN(2) == 0, dur(r, 0, 3*time.Second))
}

// flashRA is raFlash: the old addresses deleted (del) or left to expire, the router back after
// pause. It reports whether the new prefix's address became usable and the old ones went.
func (s *soak) flashRA(del bool, pause time.Duration) (usable, gone bool) {
	ra := s.ra
	old, next := ra.n, ra.n+1
	ra.radvd.Crash()
	if del {
		k := readKernel(s.w.ns.Name)
		for _, a := range k.of6(old) {
			if !a.Temporary {
				s.ip("-6", "addr", "del", a.Local+"/"+strconv.Itoa(a.Prefixlen), "dev", v6Dev)
			}
		}
		for _, a := range readKernel(s.w.ns.Name).of6(old) {
			s.ip("-6", "addr", "del", a.Local+"/"+strconv.Itoa(a.Prefixlen), "dev", v6Dev)
		}
	}
	s.rec.event("ra", "%s: router crashed (old addresses deleted: %v), back with %s in %s", v6Dev, del, prefix6(next), pause)
	time.Sleep(pause) // fault window: the router away
	ra.radvd.Start(advert(next, raPreferred, raValid))
	ra.n = next
	usable = s.wait6(30*time.Second, func(k sample) bool { return k.stableIn(next) })
	gone = s.wait6((raValid+15)*time.Second, func(k sample) bool { return len(k.of6(old)) == 0 })
	s.report6("ra", "%s: %s -> %s flash (old deleted: %v, router back after %s): new usable %v, old gone %v",
		v6Dev, prefix6(old), prefix6(next), del, pause.Round(10*time.Millisecond), usable, gone)
	return usable, gone
}

// announce makes radvd advertise ra (it rereads its configuration on SIGHUP).
func (s *soak) announce(ra harness.RA) {
	s.ra.radvd.Announce(ra)
	s.rec.event("ra", "announce %v", ra.Prefixes)
}

// privacyRotation shortens eth3's temporary address lifetimes to seconds (temp_prefered_lft,
// temp_valid_lft three times that), so that the kernel replaces its temporary addresses, and the
// route source with them, once or twice; then it restores the defaults. The Node must not change:
// a temporary source stands for the stable address of its prefix.
func privacyRotation(s *soak, r *rand.Rand, _ uplink) {
	if s.ra == nil {
		return
	}
	s.rotateTemporary(8+r.IntN(5), 1+r.IntN(2))
}

// rotateTemporary is privacyRotation with temp_prefered_lft pref, waiting for want rotations (at
// most a minute); it returns the rotations seen.
func (s *soak) rotateTemporary(pref, want int) int {
	s.tempLifetimes(pref, 3*pref)
	first := readKernel(s.w.ns.Name).temporarySource()
	last, seen := first, []string{first}
	rotations := 0
	s.wait6(60*time.Second, func(k sample) bool {
		if src := k.temporarySource(); src != "" && src != last {
			// A new temporary address of the same prefix is a rotation; one of another prefix
			// is a renumbering running beside this fault.
			if last != "" && prefixOf(src) == prefixOf(last) {
				rotations++
			}
			last = src
			seen = append(seen, src)
		}
		return rotations >= want
	})
	s.tempLifetimes(tempPreferred, tempValid)
	s.report6("ra", "%s: temp_prefered_lft %d s: the temporary route source rotated %d times (%v)", v6Dev, pref, rotations, seen)
	return rotations
}

// prefixOf is the /64 of an IPv6 address ("" when it does not parse).
func prefixOf(ip string) string { return kaddr{Local: ip, Prefixlen: 64}.prefix() }

// temporarySource is the IPv6 route source when it is a settled temporary address, else "".
func (k sample) temporarySource() string {
	a, ok := k.find(k.Internal6)
	if !ok || !a.Temporary || a.Tentative || a.Deprecated || (a.Preferred != nil && *a.Preferred == 0) {
		return ""
	}
	return a.Local
}

func (s *soak) tempLifetimes(preferred, valid int) {
	conf := "net.ipv6.conf." + v6Dev + "."
	for _, kv := range [][2]string{{"temp_valid_lft", strconv.Itoa(valid)}, {"temp_prefered_lft", strconv.Itoa(preferred)}} {
		if out, err := s.w.ns.Exec("sysctl", "-qw", conf+kv[0]+"="+kv[1]).CombinedOutput(); err != nil {
			s.rec.violate(0, "sysctl %s=%s: %v: %s", conf+kv[0], kv[1], err, out)
		}
	}
}
