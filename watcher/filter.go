package watcher

import (
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Event kinds (the "kind" label of nodeaddr_netlink_events_total), which also name the subscriptions.
const (
	KindAddress = "address"
	KindRoute   = "route"
	KindLink    = "link"
	KindRule    = "rule"
)

// Kinds lists every event kind, which is also every subscription's name.
func Kinds() []string { return []string{KindAddress, KindRoute, KindLink, KindRule} }

// Netlink messages are hints, not truth: the filters below only decide whether a message could change
// the result of a resolution. Each is owned by the goroutine of its subscription: none locks.

// addrKey identifies an address on a link.
type addrKey struct {
	index int
	ip    [16]byte
	ones  int
}

type addrState struct {
	flags, scope int
	preferred    bool
}

// addrFilter drops link-local and multicast addresses, and a repeated RTM_NEWADDR that only refreshes
// lifetimes (router advertisements); one whose flags changed (DAD completed, deprecated) is kept.
type addrFilter struct{ lastSeen[addrKey, addrState] }

// Ignore reports whether u can be dropped, and remembers u for the next call.
func (f *addrFilter) Ignore(u netlink.AddrUpdate) bool {
	ip := u.LinkAddress.IP
	if ip == nil || ip.IsLinkLocalUnicast() || ip.IsMulticast() || ip.IsLoopback() {
		return true
	}
	k := addrKey{index: u.LinkIndex}
	copy(k.ip[:], ip.To16())
	k.ones, _ = u.LinkAddress.Mask.Size()
	if !u.NewAddr {
		return f.forget(k)
	}
	return f.repeats(k, addrState{flags: u.Flags, scope: u.Scope, preferred: u.PreferedLft != 0})
}

// lastSeen is the last state of each address or link, so that a message repeating it is dropped.
type lastSeen[K, S comparable] struct{ seen map[K]S }

// repeats reports whether st is k's known state, and remembers it for the next call.
func (l *lastSeen[K, S]) repeats(k K, st S) bool {
	if old, ok := l.seen[k]; ok && old == st {
		return true
	}
	if l.seen == nil {
		l.seen = make(map[K]S)
	}
	l.seen[k] = st
	return false
}

// forget drops k (deleted); the deletion itself is never ignored.
func (l *lastSeen[K, S]) forget(k K) bool {
	delete(l.seen, k)
	return false
}

// Reset forgets what the filter has seen; used after a resubscription, when messages were lost.
func (l *lastSeen[K, S]) Reset() { clear(l.seen) }

// routeFilter drops route notifications that a route lookup toward a target cannot use: routes in
// tables no lookup consults, multicast and link-local destinations, and cached (cloned) entries.
type routeFilter struct {
	// Tables that lookups can use beyond main, local and default (from the rule list).
	Tables map[int]bool
}

// Ignore reports whether u can be dropped.
func (f *routeFilter) Ignore(u netlink.RouteUpdate) bool {
	if u.Flags&unix.RTM_F_CLONED != 0 || !f.tableUsable(u.Table) {
		return true
	}
	if d := u.Dst; d != nil {
		if d.IP.IsMulticast() || (d.IP.IsLinkLocalUnicast() && d.IP.To4() == nil) {
			return true
		}
	}
	// u.Type is the netlink message type; the route's own type is u.Route.Type.
	switch u.Route.Type {
	case unix.RTN_MULTICAST, unix.RTN_BROADCAST, unix.RTN_ANYCAST:
		return true
	}
	return false
}

func (f *routeFilter) tableUsable(t int) bool {
	switch t {
	case 0, unix.RT_TABLE_MAIN, unix.RT_TABLE_LOCAL, unix.RT_TABLE_DEFAULT:
		return true
	}
	return f.Tables[t]
}

type linkState struct {
	flags     uint32
	operState netlink.LinkOperState
	name      string
	master    int
}

// linkFilter drops link notifications that repeat the link's known state (statistics refreshes).
type linkFilter struct{ lastSeen[int32, linkState] }

// Ignore reports whether u can be dropped, and remembers u for the next call.
func (f *linkFilter) Ignore(u netlink.LinkUpdate) bool {
	if u.Header.Type == unix.RTM_DELLINK {
		return f.forget(u.Index)
	}
	st := linkState{flags: u.Flags & (unix.IFF_UP | unix.IFF_RUNNING | unix.IFF_LOWER_UP)}
	if attrs := u.Attrs(); attrs != nil {
		st.operState, st.name, st.master = attrs.OperState, attrs.Name, attrs.MasterIndex
	}
	return f.repeats(u.Index, st)
}

// ruleFilter drops rule notifications that cannot change a route lookup: families other than IPv4
// and IPv6 and no-op rules; any other rule can move a target's route to another table.
type ruleFilter struct{}

// Ignore reports whether u can be dropped.
func (ruleFilter) Ignore(u ruleUpdate) bool {
	if u.Family != unix.AF_INET && u.Family != unix.AF_INET6 {
		return true
	}
	return u.Action == unix.FR_ACT_NOP
}

// lookupTable is the table a rule added by u sends lookups to, ok false when it sends them to
// none (a deletion, another action, or a table the route filter always keeps).
func (ruleFilter) lookupTable(u ruleUpdate) (table int, ok bool) {
	if u.Type != unix.RTM_NEWRULE || u.Action != unix.FR_ACT_TO_TBL {
		return 0, false
	}
	var always routeFilter
	return u.Table, !always.tableUsable(u.Table)
}
