package harness

import (
	"fmt"
	"testing"
	"time"
)

// Eventually is how the tests wait: it calls cond at once and then every interval until cond
// reports done, and fails t (Fatalf) when timeout has passed without it. cond returns, besides
// done, what it saw ("addresses [10.0.0.2], err <nil>"); the failure says what was awaited, the
// timeout and the last thing seen, so a failed wait tells why without a rerun:
//
//	harness.Eventually(t, 30*time.Second, 100*time.Millisecond, "node n1 has InternalIP 10.0.0.2",
//		func() (bool, string) {
//			n, err := cs.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
//			return err == nil && hasIP(n, "10.0.0.2"), fmt.Sprintf("%v, err %v", addresses(n), err)
//		})
//
// A value the caller needs afterwards is kept by cond in a variable of the caller's.
func Eventually(t testing.TB, timeout, interval time.Duration, what string, cond func() (done bool, seen string)) {
	t.Helper()
	if err := Poll(timeout, interval, what, cond); err != nil {
		t.Fatal(err)
	}
}

// Poll is Eventually for a caller that does not fail at once (it reports with t.Error, returns the
// error, or takes a timeout as an answer): it returns nil when cond reports done, otherwise an
// error of the form "<what>: not within <timeout>; last seen: <seen>".
//
// Why not client-go's wait.PollUntilContextTimeout: the condition's last observation would have
// to travel out through a variable beside it anyway, and it may give up at the deadline without a
// last call; the loops this replaced always called cond once more after the deadline, which the
// slow conditions (a kubectl run, an HTTP scrape) rely on, so Poll keeps that order: call, check
// the deadline, sleep.
func Poll(timeout, interval time.Duration, what string, cond func() (done bool, seen string)) error {
	deadline := time.Now().Add(timeout)
	for {
		done, seen := cond()
		if done {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not within %s; last seen: %s", what, timeout, seen)
		}
		time.Sleep(interval)
	}
}
