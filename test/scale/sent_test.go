//go:build bench

package scale

import (
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// patchesSent is when the fleet's agents sent each PATCH on a Node, seen from the client side:
// the audit log has when the server read a request, and the two differ when the server stalls.
// With both, an outage's bursts can be told apart: agents whose retries coincide send in bursts;
// a server that stops reading receives in bursts what was sent evenly.
var patchesSent = &sendLog{}

type sendLog struct {
	mu sync.Mutex
	at []time.Time
}

// wrap is a rest.Config WrapTransport recording every PATCH on nodes as it is sent (a retry,
// client-go's or the agent's, passes through it again and counts again).
func (l *sendLog) wrap(rt http.RoundTripper) http.RoundTripper { return sendRecorder{rt, l} }

type sendRecorder struct {
	next http.RoundTripper
	log  *sendLog
}

func (s sendRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodPatch && strings.Contains(req.URL.Path, "/nodes/") {
		s.log.mu.Lock()
		s.log.at = append(s.log.at, time.Now())
		s.log.mu.Unlock()
	}
	return s.next.RoundTrip(req)
}

// reset forgets every send (a fleet starts from an empty log).
func (l *sendLog) reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.at = nil
}

// between returns the sends in [from, to], in order.
func (l *sendLog) between(from, to time.Time) []time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []time.Time
	for _, at := range l.at {
		if !at.Before(from) && !at.After(to) {
			out = append(out, at)
		}
	}
	slices.SortFunc(out, time.Time.Compare)
	return out
}

// peakPerSecond is the most instants of sorted within any one second (a sliding window).
func peakPerSecond(sorted []time.Time) int {
	best, lo := 0, 0
	for hi, at := range sorted {
		for at.Sub(sorted[lo]) >= time.Second {
			lo++
		}
		best = max(best, hi-lo+1)
	}
	return best
}

// perSecond counts sorted's instants in each one-second bucket of n from start.
func perSecond(sorted []time.Time, start time.Time, n int) []int {
	out := make([]int, n)
	for _, at := range sorted {
		if i := int(at.Sub(start) / time.Second); i >= 0 && i < n {
			out[i]++
		}
	}
	return out
}
