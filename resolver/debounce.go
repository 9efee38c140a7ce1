package resolver

import "time"

// debouncer is a trailing-edge debounce with a maximum delay: a burst is resolved Quiet after its
// last event (LinkQuiet after a link event, as bonding's updelay/downdelay, so a flapping carrier is
// not published), but never later than MaxDelay after its first. The caller arms its own timer.
type debouncer struct {
	Quiet, LinkQuiet, MaxDelay time.Duration
	first, last, lastLink      time.Time
}

// Event records an event at now; link says the burst had a link event since the last one.
func (d *debouncer) Event(now time.Time, link bool) {
	if d.first.IsZero() {
		d.first = now
	}
	d.last = now
	if link {
		d.lastLink = now
	}
}

// Due returns when the pending burst should be resolved and why it waits until then (the quiet that
// applies, or the cap), and false when nothing is pending.
func (d *debouncer) Due() (due time.Time, why string, ok bool) {
	if d.first.IsZero() {
		return time.Time{}, "", false
	}
	due, why = d.last.Add(d.Quiet), "quiet "+d.Quiet.String()+" after the last address, route or rule event"
	if !d.lastLink.IsZero() {
		if hold := d.lastLink.Add(d.LinkQuiet); hold.After(due) {
			due, why = hold, "link hold "+d.LinkQuiet.String()+" after the last link event"
		}
	}
	if limit := d.first.Add(d.MaxDelay); d.MaxDelay > 0 && limit.Before(due) {
		due, why = limit, "max delay "+d.MaxDelay.String()+" after the burst's first event"
	}
	return due, why, true
}

// Reset clears the pending burst (after it was resolved).
func (d *debouncer) Reset() { d.first, d.last, d.lastLink = time.Time{}, time.Time{}, time.Time{} }
