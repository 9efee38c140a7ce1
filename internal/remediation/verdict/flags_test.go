package verdict

import (
	"testing"
	"time"
)

// TestRemediatorGrace: the grace `stale` reports is the one the remediator runs with, the last
// --grace of its arguments (the two-node overlay appends --grace=10s after the base's --grace=1m).
func TestRemediatorGrace(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		want    time.Duration
		wantErr bool
	}{
		{"absent", []string{"--metrics-bind-address=:9090"}, DefaultGrace, false},
		{"one", []string{"--grace=30s"}, 30 * time.Second, false},
		{"overlay appends: the last wins", []string{"--grace=1m", "--max-evictions-per-node=1", "--grace=10s"}, 10 * time.Second, false},
		{"two args", []string{"--grace", "45s"}, 45 * time.Second, false},
		{"two args after one", []string{"--grace=1m", "--grace", "10s"}, 10 * time.Second, false},
		{"one after two args", []string{"--grace", "10s", "--grace=2m"}, 2 * time.Minute, false},
		{"unknown flag with a separate value", []string{"--max-evictions", "5", "--grace=20s"}, 20 * time.Second, false},
		{"invalid: the remediator refuses it", []string{"--grace=10s", "--grace=soon"}, 0, true},
		{"zero: the remediator refuses it", []string{"--grace=10s", "--grace=0s"}, 0, true},
		{"dangling --grace", []string{"--grace=10s", "--grace"}, 0, true},
	} {
		got, err := RemediatorGrace(tc.args)
		if got != tc.want || (err != nil) != tc.wantErr {
			t.Errorf("%s: RemediatorGrace(%q) = %s, %v; want %s, error %v", tc.name, tc.args, got, err, tc.want, tc.wantErr)
		}
	}
}
