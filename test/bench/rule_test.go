//go:build bench

package bench

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

// ruleReaction is the reaction to policy routing: a second uplink (eth1) whose table 100 an
// `ip rule add to 8.8.8.8 lookup 100` sends the target's lookup to, and `ip rule del` takes back.
// Each sample is the time from the ip command returning to a client-go watch seeing the Node's new
// ExternalIP; the agent runs with its defaults (--debounce=10ms, --link-debounce=100ms).
func ruleReaction(t *testing.T, samples int) quantiles {
	e := newEnv(t, "rule")
	e.Uplink("eth1", "198.51.100.10/24", "198.51.100.1", 200)
	e.ns.IP("route", "add", "default", "via", "198.51.100.1", "dev", "eth1", "table", "100")
	e.cp.CreateNode(t, harness.NodeSpec{Name: e.node})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := e.watch(ctx)
	e.start()
	waitFor(t, ch, 30*time.Second, func(s seen) bool { return s.addrs == "ExternalIP=192.0.2.10" })
	var ds []time.Duration
	ruled := false
	for range samples {
		// Random phase against the resync ticker and the rate limiter (1 write/s sustained).
		time.Sleep(time.Duration(1000+rand.IntN(400)) * time.Millisecond) // kernel interval: 1-1.4 s between renumberings
		want := "ExternalIP=198.51.100.10"
		if ruled {
			e.ns.IP("rule", "del", "priority", "1000")
			want = "ExternalIP=192.0.2.10"
		} else {
			e.ns.IP("rule", "add", "to", "8.8.8.8/32", "lookup", "100", "priority", "1000")
		}
		t0 := time.Now()
		ruled = !ruled
		s := waitFor(t, ch, 30*time.Second, func(s seen) bool { return s.addrs == want })
		ds = append(ds, s.at.Sub(t0))
	}
	r := q(ds)
	t.Logf("ip rule: %+v", r)
	return r
}
