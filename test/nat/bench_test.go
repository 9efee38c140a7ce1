//go:build bench

package nat

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

// The uplink is renumbered behind the NAT between two subnets the router maps to two public
// addresses; each sample is the time from the renumbering's last `ip` command returning to a
// client-go watch seeing the Node's new ExternalIP (debounce + one STUN round trip to each server
// + the write). NODEADDR_BENCH_NAT_SAMPLES (default 30) changes; NODEADDR_BENCH_OUT receives the
// docs/BENCHMARKS.md section. It reports; it asserts nothing about speed.
func TestNATUplinkChangeBench(t *testing.T) {
	samples := 30
	if v, err := strconv.Atoi(os.Getenv("NODEADDR_BENCH_NAT_SAMPLES")); err == nil && v > 0 {
		samples = v
	}
	w := newWorld(t, "nat-bench", 3)
	w.nat.RouterAddr("eth0", "10.0.2.1/24")
	w.nat.SetSNAT(harness.SNAT{From: "10.0.1.0/24", Public: "203.0.113.10"}, harness.SNAT{From: "10.0.2.0/24", Public: "203.0.113.11"})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := watchExternal(t, ctx, w)
	var urls []string
	for _, s := range w.servers {
		urls = append(urls, s.URL())
	}
	w.h.Start("--external-ip-discovery="+strings.Join(urls, ","), "--internal-ip-target=none")
	waitExternal(t, ch, "203.0.113.10")
	w0 := w.statusWrites()

	type side struct{ addr, gw, public string }
	a, b := side{"10.0.1.10", "10.0.1.1", "203.0.113.10"}, side{"10.0.2.10", "10.0.2.1", "203.0.113.11"}
	var ds []time.Duration
	for range samples {
		time.Sleep(time.Duration(1000+rand.IntN(400)) * time.Millisecond) // kernel interval: 1-1.4 s between renumberings
		// Make-before-break, as a network manager renumbers.
		w.h.NS.IP("addr", "add", b.addr+"/24", "dev", "eth0")
		w.h.NS.IP("route", "replace", "default", "via", b.gw, "dev", "eth0")
		w.h.NS.IP("addr", "del", a.addr+"/24", "dev", "eth0")
		t0 := time.Now()
		ds = append(ds, waitExternal(t, ch, b.public).Sub(t0))
		a, b = b, a
	}
	writes := w.statusWrites() - w0
	slices.Sort(ds)
	at := func(p float64) time.Duration { return ds[min(len(ds)-1, int(p*float64(len(ds))))] }
	ms := func(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/1e6) }
	out := fmt.Sprintf("### ExternalIP behind NAT: uplink renumbered → ExternalIP updated\n\n"+
		"`TestNATUplinkChangeBench` (test/nat, build tag `bench`), %s: the node's uplink moves between "+
		"10.0.1.10/24 and 10.0.2.10/24 (make-before-break) behind an nftables router mapping them to "+
		"203.0.113.10 and .11; three coturn `--stun-only` servers on the far side. Time from the last "+
		"`ip` command to a client-go watch seeing the new ExternalIP (the default debounce, "+
		"`--internal-ip-target=none`), changes 1.0–1.4 s apart.\n\n"+
		"| n | p50 | p95 | p99 | max | status writes |\n|---|---|---|---|---|---|\n| %d | %s | %s | %s | %s | %d |\n\n"+
		"One write per change means no intermediate list: the old mapped address stays published until "+
		"the new route source's answer arrives. Compare with section 1's default (no NAT, no discovery).\n\n",
		time.Now().UTC().Format("2006-01-02 15:04 UTC"), len(ds), ms(at(0.5)), ms(at(0.95)), ms(at(0.99)), ms(ds[len(ds)-1]), writes)
	fmt.Print(out)
	if p := os.Getenv("NODEADDR_BENCH_OUT"); p != "" {
		if err := os.WriteFile(p, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

type seenExternal struct {
	at   time.Time
	addr string
}

func watchExternal(t *testing.T, ctx context.Context, w *world) <-chan seenExternal {
	wt, err := w.h.CP.Admin.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", w.h.Node).String()})
	if err != nil {
		t.Fatal(err)
	}
	out := make(chan seenExternal, 1024)
	go func() {
		defer wt.Stop()
		for ev := range wt.ResultChan() {
			if n, ok := ev.Object.(*corev1.Node); ok {
				for _, a := range n.Status.Addresses {
					if a.Type == corev1.NodeExternalIP {
						out <- seenExternal{time.Now(), a.Address}
					}
				}
			}
		}
	}()
	return out
}

func waitExternal(t *testing.T, ch <-chan seenExternal, want string) time.Time {
	t.Helper()
	// A watch, not a poll: the time each ExternalIP was seen is the measurement.
	timeout := time.After(30 * time.Second)
	var last []string
	for {
		select {
		case s := <-ch:
			if s.addr == want {
				return s.at
			}
			last = append(last, s.addr)
		case <-timeout:
			t.Fatalf("ExternalIP %s not seen within 30s; seen %v", want, last)
		}
	}
}
