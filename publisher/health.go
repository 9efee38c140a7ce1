package publisher

import "sync/atomic"

// health is the readiness and the count of consecutive failed writes (worker only, except ready).
type health struct {
	ready     atomic.Bool
	warnAfter int
	failures  int
	warned    bool
}

// succeeded resets the failure count.
func (h *health) succeeded() { h.failures, h.warned = 0, false }

// failed counts a failed write and reports whether it is the one to warn about.
func (h *health) failed() (warn bool) {
	h.failures++
	h.ready.Store(false)
	if h.failures >= h.warnAfter && !h.warned {
		h.warned = true
		return true
	}
	return false
}
