package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nodeaddr/nodeaddr/internal/remediation/verdict"
)

func TestRemediatorFlags(t *testing.T) {
	env := func(k string) string { return map[string]string{"POD_NAMESPACE": "nodeaddr-system"}[k] }
	o, err := parseRemediatorFlags([]string{"--grace=2m", "--max-evictions-per-node=2", "--max-evictions=50"}, env, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if o.grace != 2*time.Minute || o.maxPerNode != 2 || o.maxInFlight != 50 || o.namespace != "nodeaddr-system" ||
		o.leaseName != "nodeaddr-remediator" || o.bindAddr != ":9814" || !o.leaderElect {
		t.Errorf("options = %+v", o)
	}
	if o, _ = parseRemediatorFlags(nil, env, &bytes.Buffer{}); o.grace != verdict.DefaultGrace || o.maxPerNode != 1 || o.maxInFlight != 10 {
		t.Errorf("defaults = %+v", o)
	}
}

func TestRemediatorUsageErrors(t *testing.T) {
	for _, args := range [][]string{{"--grace=0s"}, {"--max-evictions=0"}, {"--max-evictions-per-node=-1"}, {"extra"}, {"--log-level=loud"}, {"--nope"}} {
		var stderr bytes.Buffer
		if code := run(context.Background(), append([]string{"remediator"}, args...), func(string) string { return "" }, &bytes.Buffer{}, &stderr); code != 2 {
			t.Errorf("nodeaddr remediator %v: exit %d, want 2", args, code)
		}
		if !strings.HasPrefix(stderr.String(), "nodeaddr remediator: ") {
			t.Errorf("nodeaddr remediator %v: stderr %q", args, stderr.String())
		}
	}
}
