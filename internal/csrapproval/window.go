package csrapproval

// When the approver watches. A kubelet files a serving CSR at two moments only: about a second after
// it sees its Node's addresses change (the observed 0.8–1 s on the real node; it asks for every IP of
// the Node), and when its serving certificate nears expiry (rotation, same addresses). So the
// approver watches CSRs only in a window opened by the first kind of moment — the agent's start and
// each change of the Node's addresses, whoever wrote them — and catches rotations with one LIST per
// backstop interval. Outside a window it holds no watch: a CSR watch cannot be narrowed to one node
// (spec.signerName is the only selector besides metadata.name), so every open watch receives every
// node's CSRs, N² events on a mass renumbering, and client-go would renew it every 5–10 minutes.
// The Node's creation opens a window too: the kubelet files its first serving CSR once it has
// registered its Node.

import (
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Window bounds, defaults of Config.Window and the window's minimum time open.
const (
	// DefaultWindow is how long a window stays open after its latest opening, unless it settles
	// first: the kubelet needs about a second, more on a loaded control plane, and retries its CSR
	// only after 15 minutes (client-go's certificate manager).
	DefaultWindow = 3 * time.Minute
	// DefaultBackstop is the default interval of the backstop LIST. A rotation CSR comes with no
	// address change, and the kubelet waits 15 minutes for its certificate before it files another
	// (client-go's certificate manager), so one LIST per 10 minutes, at a random phase, approves it
	// in time. Every LIST returns every node's kubelet-serving CSRs: at the 60 s resync interval it
	// cost 60 LISTs per node-hour (docs/BENCHMARKS.md), where the permanent watch it replaces cost 8
	// renewals.
	DefaultBackstop = 10 * time.Minute
	// minOpen is how long a window stays open at least after its latest opening, even when the
	// newest CSR is already decided: on a make-before-break renumbering the Node changes twice within
	// seconds, and the second CSR comes about a second after the second change.
	minOpen = 5 * time.Second
	// skew is how much earlier than the opening (by the agent's clock) a CSR may have been created
	// (by the API server's clock, in whole seconds) and still count as filed after it.
	skew = 2 * time.Second
)

// window is the watch window: open from each opening for span, or until settled.
type window struct {
	span, minOpen time.Duration
	since, until  time.Time // the latest opening and the end; until zero: never opened
	// from is the resource version the next watch may start from instead of a LIST: the earliest
	// one given by the openings since the last watch started, when each gave one.
	from string
	list bool // an opening gave none: the next watch starts with a LIST
}

// open opens the window at now, or extends it: a CSR is expected after this opening. rv, when not
// empty, is a resource version from before the CSR can be filed (that of the Node change the
// kubelet reacts to); CSRs share the API server's resource versions with Nodes, so a watch from it
// sees the CSR without the LIST that would return every node's CSRs.
func (w *window) open(now time.Time, rv string) {
	w.since = now
	if end := now.Add(w.span); end.After(w.until) {
		w.until = end
	}
	switch {
	case rv == "":
		w.list = true
	case w.from == "":
		w.from = rv
	}
}

// start returns the resource version the window's watch starts from ("": LIST first) and forgets
// it: the openings after this start are seen by the running watch.
func (w *window) start() string {
	rv := w.from
	if w.list {
		rv = ""
	}
	w.from, w.list = "", false
	return rv
}

// close ends the window at once.
func (w *window) close() {
	w.until = time.Time{}
	w.from, w.list = "", false
}

// isOpen reports whether the approver should watch at now, given the Node's own CSRs.
func (w window) isOpen(now time.Time, own []filing) bool {
	return now.Before(w.until) && !w.settled(now, own)
}

// filing is one of the Node's own kubelet-serving CSRs as the window needs it.
type filing struct {
	created time.Time // creationTimestamp (API server clock, whole seconds)
	decided bool      // approved, denied or failed, by anyone
}

// settled reports whether the window may close before its end: it has been open for minOpen since
// its latest opening, none of the Node's CSRs is pending, and the newest was filed after that
// opening and is decided. A window opened with no CSR to come (an agent restart with unchanged
// addresses) does not settle and runs for its span.
func (w window) settled(now time.Time, own []filing) bool {
	if now.Before(w.since.Add(w.minOpen)) || len(own) == 0 {
		return false
	}
	newest := own[0]
	for _, f := range own {
		if !f.decided {
			return false
		}
		if f.created.After(newest.created) {
			newest = f
		}
	}
	return !newest.created.Before(w.since.Add(-skew))
}

// recheckAt is when a window that is open at now may settle without any event: the end of its
// minimum time open (zero when that has passed).
func (w window) recheckAt(now time.Time) time.Time {
	if at := w.since.Add(w.minOpen); now.Before(at) {
		return at
	}
	return time.Time{}
}

// AddressesChanged reports whether a Node update changed its status.addresses (an InternalIP, an
// ExternalIP, a name): the kubelet then files a serving CSR for the new set. A heartbeat does not.
func AddressesChanged(old, updated *corev1.Node) bool {
	if old == nil || updated == nil {
		return false
	}
	return !slices.Equal(old.Status.Addresses, updated.Status.Addresses)
}
