package main

import (
	"testing"
	"time"

	"github.com/nodeaddr/nodeaddr/internal/remediation/verdict"
)

// TestRemediatorGrace: the grace `stale` reports is the one the remediator runs with, the last
// --grace of its arguments (the two-node overlay appends --grace=10s after the base's --grace=1m).
func TestRemediatorGrace(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want time.Duration
	}{
		{"absent", []string{"--metrics-bind-address=:9090"}, verdict.DefaultGrace},
		{"one", []string{"--grace=30s"}, 30 * time.Second},
		{"overlay appends: the last wins", []string{"--grace=1m", "--max-evictions-per-node=1", "--grace=10s"}, 10 * time.Second},
		{"two args", []string{"--grace", "45s"}, 45 * time.Second},
		{"two args after one", []string{"--grace=1m", "--grace", "10s"}, 10 * time.Second},
		{"one after two args", []string{"--grace", "10s", "--grace=2m"}, 2 * time.Minute},
		{"last invalid: the remediator refuses it, default", []string{"--grace=10s", "--grace=soon"}, verdict.DefaultGrace},
		{"last zero", []string{"--grace=10s", "--grace=0s"}, verdict.DefaultGrace},
		{"dangling --grace", []string{"--grace=10s", "--grace"}, 10 * time.Second},
	} {
		if got := remediatorGrace(tc.args); got != tc.want {
			t.Errorf("%s: remediatorGrace(%q) = %s, want %s", tc.name, tc.args, got, tc.want)
		}
	}
}
