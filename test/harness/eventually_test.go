package harness

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// fatalRecorder is a testing.TB whose Fatal only records (the real one would end the goroutine).
type fatalRecorder struct {
	testing.TB
	fatal string
}

func (r *fatalRecorder) Helper()           {}
func (r *fatalRecorder) Fatal(args ...any) { r.fatal = fmt.Sprint(args...) }

// A wait that times out says what it waited for, the timeout and the last thing cond saw (each call
// sees another address: the failure names the last call's).
func TestEventuallyFailureSaysWhatWasLastSeen(t *testing.T) {
	r := &fatalRecorder{TB: t}
	calls := 0
	Eventually(r, 30*time.Millisecond, time.Millisecond, "node n1 has InternalIP 10.0.0.2", func() (bool, string) {
		calls++
		return false, fmt.Sprintf("addresses [10.0.0.%d]", calls)
	})
	want := fmt.Sprintf("node n1 has InternalIP 10.0.0.2: not within 30ms; last seen: addresses [10.0.0.%d]", calls)
	if r.fatal != want {
		t.Fatalf("failure = %q, want %q", r.fatal, want)
	}
	t.Logf("%d calls; %s", calls, r.fatal)
}

// A wait whose condition holds returns without failing, after the first call that reports done,
// and Poll then returns nil.
func TestEventuallyStopsWhenDone(t *testing.T) {
	r := &fatalRecorder{TB: t}
	calls := 0
	Eventually(r, time.Minute, time.Millisecond, "third call", func() (bool, string) {
		calls++
		return calls == 3, fmt.Sprint(calls)
	})
	if r.fatal != "" || calls != 3 {
		t.Fatalf("fatal %q after %d calls, want none after 3", r.fatal, calls)
	}
	if err := Poll(time.Minute, time.Millisecond, "at once", func() (bool, string) { return true, "" }); err != nil {
		t.Fatalf("Poll = %v, want nil", err)
	}
}

// cond is called once more after the deadline, as the hand-written loops did: a condition that
// first holds on that call passes.
func TestPollCallsOnceMoreAfterTheDeadline(t *testing.T) {
	start := time.Now()
	err := Poll(20*time.Millisecond, 50*time.Millisecond, "late", func() (bool, string) {
		return time.Since(start) > 20*time.Millisecond, "early"
	})
	if err != nil {
		t.Fatalf("Poll = %v, want nil (the call after the deadline holds)", err)
	}
	err = Poll(0, time.Millisecond, "never", func() (bool, string) { return false, "no" })
	if err == nil || !strings.HasSuffix(err.Error(), "last seen: no") {
		t.Fatalf("Poll = %v, want the last observation", err)
	}
}
