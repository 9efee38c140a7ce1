package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/nodeaddr/nodeaddr/internal/inspect"
	"github.com/nodeaddr/nodeaddr/internal/vocab"
	"github.com/nodeaddr/nodeaddr/resolver"
	"github.com/nodeaddr/nodeaddr/watcher"
)

// explanations are the explanation records in a JSON log, each as its lines' String form.
func explanations(t *testing.T, log *bytes.Buffer) [][]string {
	t.Helper()
	var out [][]string
	for _, l := range strings.Split(strings.TrimSpace(log.String()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(l), &rec); err != nil || rec["msg"] != vocab.ExplainMessage {
			continue
		}
		if rec["level"] != "INFO" || rec["node"] != nodeName {
			t.Errorf("explanation record %s: want level INFO and node %s", l, nodeName)
		}
		var lines []resolver.Explained
		if err := json.Unmarshal([]byte(rec[vocab.ExplainKey].(string)), &lines); err != nil {
			t.Fatalf("explanation %s: %v", l, err)
		}
		var s []string
		for _, e := range lines {
			s = append(s, e.String())
		}
		out = append(out, s)
	}
	return out
}

// The agent logs the explanation --explain prints once per change of its addresses (none for a
// resolution that changes nothing), with the Node's pod CIDR excluded as the loop excludes it.
func TestAgentLogsExplanationOnChange(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := newClient(registered("10.244.0.0/24"))
		k := &kernel{}
		k.set("203.0.113.7", "10.244.0.1")
		sig := watcher.NewSignal()
		var log bytes.Buffer
		cfg := config(client, k, sig)
		cfg.Publisher.Logger = slog.New(slog.NewJSONHandler(&log, nil))
		cfg.Loop.Policy.Types = map[resolver.AddressType]resolver.TypePolicy{resolver.ExternalIP: {
			CIDRs: []resolver.CIDRRule{{Prefix: netip.MustParsePrefix("0.0.0.0/0")}}}}
		a := newAgent(t, cfg)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- a.Run(ctx) }()
		step := func() { sig.Raise(time.Now()); time.Sleep(time.Second); synctest.Wait() }
		time.Sleep(time.Second)
		synctest.Wait()
		k.set("203.0.113.8", "10.244.0.1")
		step()
		step() // no change: no explanation
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("Run = %v", err)
		}
		got := fmt.Sprint(explanations(t, &log))
		want := fmt.Sprint([][]string{{
			"ExternalIP IPv4 10.244.0.1 (interface eth0): rejected: inside an excluded network (service or pod CIDR): 10.244.0.0/24",
			"ExternalIP IPv4 203.0.113.7 (route to 198.51.100.1): chosen",
			"ExternalIP IPv6: no accepted candidate: not published",
		}, {
			"ExternalIP IPv4 10.244.0.1 (interface eth0): rejected: inside an excluded network (service or pod CIDR): 10.244.0.0/24",
			"ExternalIP IPv4 203.0.113.8 (route to 198.51.100.1): chosen",
			"ExternalIP IPv6: no accepted candidate: not published",
		}})
		if got != want {
			t.Errorf("explanations\n%s\nwant\n%s", got, want)
		}
	})
}

// RunOnce explains its one state too, with the Node's addresses as the reference for stickiness.
func TestRunOnceLogsExplanation(t *testing.T) {
	node := registered("")
	client := newClient(node)
	k := &kernel{}
	k.set("203.0.113.7")
	var log bytes.Buffer
	cfg := config(client, k, nil)
	cfg.Publisher.Logger = slog.New(slog.NewJSONHandler(&log, nil))
	if _, err := newAgent(t, cfg).RunOnce(t.Context()); err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprint(explanations(t, &log))
	if want := fmt.Sprint([][]string{{"ExternalIP IPv4 203.0.113.7 (route to 198.51.100.1): chosen",
		"ExternalIP IPv6: " + resolver.NoTarget}}); got != want {
		t.Errorf("explanations %s, want %s", got, want)
	}
}

// The record the agent logs reads back, through kubectl nodeaddr's parser (text log format, the
// default), as the very lines `--dry-run --explain` prints for the same host and flags (the
// dual-stack example of explainConfig).
func TestExplanationRecordReadsBackAsDryRunExplain(t *testing.T) {
	var dry bytes.Buffer
	if _, err := newAgent(t, explainConfig(&dry, false)).RunOnce(t.Context()); err != nil {
		t.Fatal(err)
	}
	want, _, _ := strings.Cut(dry.String(), "{") // the explanation, before the JSON line

	var log bytes.Buffer
	cfg := explainConfig(nil, false)
	cfg.DryRun, cfg.Explain = nil, false
	cfg.Nodes = fakeNodes{newClient(registered("")).CoreV1().Nodes()}
	cfg.Publisher.Logger = slog.New(slog.NewTextHandler(&log, nil))
	if _, err := newAgent(t, cfg).RunOnce(t.Context()); err != nil {
		t.Fatal(err)
	}
	e, ok, err := inspect.LastExplanation(log.Bytes())
	if err != nil || !ok {
		t.Fatalf("no explanation read back (%v) from:\n%s", err, log.String())
	}
	var got strings.Builder
	for _, l := range e.Lines {
		got.WriteString(l.String() + "\n")
	}
	if got.String() != want {
		t.Errorf("read back:\n%s\nwant what --dry-run --explain prints:\n%s", got.String(), want)
	}
}
