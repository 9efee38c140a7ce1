// Package soak runs nodeaddr for a long time under a seeded random schedule of overlapping faults
// and checks it against an oracle that shares none of its code. NODEADDR_SOAK_SEED
// replays a schedule; NODEADDR_SOAK_DURATION sets the length (make soak: SOAK_DURATION, 30m).
package soak

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

func TestMain(m *testing.M) { os.Exit(harness.MainE2E(m)) }

func seedFromEnv(t *testing.T) uint64 {
	if v := os.Getenv("NODEADDR_SOAK_SEED"); v != "" {
		seed, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("NODEADDR_SOAK_SEED=%q: %v", v, err)
		}
		return seed
	}
	return rand.Uint64() >> 1
}

func durationFromEnv(t *testing.T) time.Duration {
	d := 3 * time.Minute
	if v := os.Getenv("NODEADDR_SOAK_DURATION"); v != "" {
		var err error
		if d, err = time.ParseDuration(v); err != nil {
			t.Fatalf("NODEADDR_SOAK_DURATION=%q: %v", v, err)
		}
	}
	return d
}

// TestSoak is the soak: the seed first, then the run, then its figures (written to
// NODEADDR_SOAK_OUT when set) and every violation with its timeline.
func TestSoak(t *testing.T) {
	seed := seedFromEnv(t)
	d := durationFromEnv(t)
	fmt.Printf("soak: seed %d (replay: NODEADDR_SOAK_SEED=%d), duration %s\n", seed, seed, d)
	t.Logf("seed %d, duration %s", seed, d)
	s := newSoak(t, seed)
	s.startNft()
	s.startDHCP()
	s.startRA()
	s.startDHCP6()
	s.startPressure()
	s.run(d)
	n, lag := s.timeline.stamps()
	s.rec.mu.Lock()
	s.rec.oracleLine = fmt.Sprintf("oracle: %d kernel samples stamped from the kernel's notifications, read up to %s after them; "+
		"%d agent writes invariant 2 would have reported with samples stamped by when their read began",
		n, lag.Round(time.Millisecond), s.rec.readLate)
	s.rec.mu.Unlock()
	sum := s.rec.summary()
	t.Log("\n" + sum)
	for _, l := range strings.Split(strings.TrimSpace(sum), "\n") {
		fmt.Println("soak: " + l)
	}
	if out := os.Getenv("NODEADDR_SOAK_OUT"); out != "" {
		if err := os.WriteFile(out, []byte(sum), 0o644); err != nil {
			t.Error(err)
		}
	}
	s.report(t)
}

// report fails t with every violation and the agent's last log lines.
func (s *soak) report(t *testing.T) {
	s.rec.mu.Lock()
	vs := append([]string(nil), s.rec.violations...)
	s.rec.mu.Unlock()
	for _, v := range vs {
		t.Error(v)
	}
	if len(vs) > 0 {
		t.Logf("agent's last log lines:\n%s", tail(s.w.currentAgent().Logs(), 60))
	}
}

// The oracle catches a wrong write: with the agent's own credentials, the test publishes an
// address the host never had and puts the uninitialized taint back; the next quiet period reports
// invariants 2 and 4 (and the agent's correction is not counted against it).
func TestOracleCatchesWrongWrite(t *testing.T) {
	s := newSoak(t, 1)
	s.settle("start", time.Now(), 0)
	if n := s.rec.violationCount(); n != 0 {
		s.report(t)
		t.Fatalf("%d violations before the injection", n)
	}
	agent := kubernetes.NewForConfigOrDie(&rest.Config{Host: s.w.cp.Config.Host, BearerToken: s.w.token,
		TLSClientConfig: rest.TLSClientConfig{Insecure: true}})
	ctx := context.Background()
	n, err := agent.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wrong := append(n.Status.Addresses[:0:0], n.Status.Addresses...)
	for i := range wrong {
		if wrong[i].Type == "InternalIP" {
			wrong[i].Address = "203.0.113.77"
		}
	}
	patch, _ := json.Marshal([]map[string]any{{"op": "replace", "path": "/status/addresses", "value": wrong}})
	if _, err := agent.CoreV1().Nodes().Patch(ctx, nodeName, types.JSONPatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
		t.Fatalf("inject the wrong address: %v", err)
	}
	taint, _ := json.Marshal([]map[string]any{{"op": "add", "path": "/spec/taints/-", "value": map[string]string{
		"key": "node.cloudprovider.kubernetes.io/uninitialized", "value": "true", "effect": "NoSchedule"}}})
	if _, err := agent.CoreV1().Nodes().Patch(ctx, nodeName, types.JSONPatchType, taint, metav1.PatchOptions{}); err != nil {
		t.Fatalf("inject the taint: %v", err)
	}
	s.settle("after the injection", time.Now(), 0)
	s.rec.mu.Lock()
	got := strings.Join(s.rec.violations, "\n")
	s.rec.mu.Unlock()
	for _, want := range []string{"invariant 2", "203.0.113.77", "invariant 4", "NODEADDR_SOAK_SEED=1", "Node history"} {
		if !strings.Contains(got, want) {
			t.Errorf("the soak's report lacks %q:\n%s", want, got)
		}
	}
	t.Logf("the soak reported:\n%s", got)
}
