package agent

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/nodeaddr/nodeaddr/watcher"
)

// A failing list/watch of the Node is logged at WARN at once, then at most every apiWarnEvery
// with the number of failures in between; a request succeeding again logs that the API server
// answers, and /readyz's reason names the error until then.
func TestAPIStateWarnsAndExplains(t *testing.T) {
	var buf bytes.Buffer
	now := time.Date(2026, 12, 4, 5, 0, 0, 0, time.UTC)
	s := &apiState{log: slog.New(slog.NewTextHandler(&buf, nil)), now: func() time.Time { return now }}
	warns := func() int { return strings.Count(buf.String(), "level=WARN") }

	if s.why() != nil {
		t.Fatal("why() before any failure")
	}
	refused := errors.New("dial tcp 127.0.0.1:1: connect: connection refused")
	s.observe(refused)
	if warns() != 1 || !strings.Contains(buf.String(), "connection refused") {
		t.Fatalf("the first failure is not logged at WARN with its error:\n%s", buf.String())
	}
	for range 5 { // client-go's backoff retries within the next seconds
		now = now.Add(time.Second)
		s.observe(refused)
	}
	if warns() != 1 {
		t.Fatalf("%d WARN lines within %s, want 1:\n%s", warns(), apiWarnEvery, buf.String())
	}
	now = now.Add(apiWarnEvery)
	s.observe(refused)
	if warns() != 2 || !strings.Contains(buf.String(), "failures=6") {
		t.Fatalf("after %s: want a second WARN counting the 6 failures since the first:\n%s", apiWarnEvery, buf.String())
	}
	now = now.Add(2 * time.Second)
	if err := s.why(); err == nil || !strings.Contains(err.Error(), "connection refused") || !strings.Contains(err.Error(), "2s ago") {
		t.Fatalf("why() = %v, want the error and its age", err)
	}
	s.observe(nil)
	if s.why() != nil || !strings.Contains(buf.String(), "the API server answers again") {
		t.Fatalf("after a request succeeded: why() = %v, log:\n%s", s.why(), buf.String())
	}
	s.observe(nil) // a success with nothing failed before logs nothing
	if n := strings.Count(buf.String(), "answers again"); n != 1 {
		t.Fatalf("%d 'answers again' lines, want 1", n)
	}
}

// The whole agent against an API server that refuses connections (a kubeconfig pointing at
// 127.0.0.1:1): the WARN comes from client-go's real failure, and Readyz says why.
func TestAgentUnreachableAPIServerIsVisible(t *testing.T) {
	var buf syncBuffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: "https://127.0.0.1:1", Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	k := &kernel{}
	k.set("192.0.2.10")
	cfg := config(nil, k, watcher.NewSignal())
	cfg.Nodes, cfg.Publisher.Logger = cs.CoreV1().Nodes(), log
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("agent: %v", err)
		}
	}()
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(buf.String(), "cannot list or watch the Node") {
		if time.Now().After(deadline) {
			t.Fatalf("no WARN about the unreachable API server; log:\n%s", buf.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !strings.Contains(buf.String(), "level=WARN") || !strings.Contains(buf.String(), "127.0.0.1:1") {
		t.Fatalf("the log does not name the endpoint at WARN:\n%s", buf.String())
	}
	if err := a.Readyz(); err == nil || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Fatalf("Readyz() = %v, want the API error", err)
	}
}

// syncBuffer is a bytes.Buffer safe for the agent's goroutines and the test's reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
