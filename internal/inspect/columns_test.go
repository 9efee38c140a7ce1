package inspect

import (
	"fmt"
	"strings"
	"testing"
	"text/tabwriter"
	"time"
	"unicode/utf8"
)

func render(table [][]string) string {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 8, 2, ' ', 0)
	for _, row := range table {
		fmt.Fprintln(tw, strings.TrimRight(strings.Join(row, "\t"), "\t"))
	}
	tw.Flush()
	return b.String()
}

var rows = []NodeStatus{
	{Node: "node-a", InternalIPs: []string{"10.0.0.1", "fd00::1"}, ExternalIPs: []string{}, Writers: []Writer{{"nodeaddr", WriterNodeaddr}},
		LastWrite: at(-5 * time.Minute), Agent: &AgentPod{"kube-system", "nodeaddr-x", true, 0, "0.1.0"}, Attention: []string{}},
	{Node: "node-b", InternalIPs: []string{}, ExternalIPs: []string{}, Writers: []Writer{}, Uninitialized: true,
		LastWarning: &Warning{Reason: "ProvidedNodeIPNotFound", Message: "10.9.9.9 is not on the host", Time: *at(-2 * time.Hour), Count: 4},
		Attention:   []string{AttentionNoAgent, AttentionTaintedWithoutAddresss}},
	{Node: "vm-2", InternalIPs: []string{"10.0.2.15"}, ExternalIPs: []string{}, Writers: []Writer{{"nodeaddr", WriterNodeaddr}},
		LastWrite: at(-5 * time.Minute), Agent: &AgentPod{"kube-system", "nodeaddr-y", true, 0, "0.1.0"},
		Conflict: "10.0.2.15 is also listed by Node vm-1", Attention: []string{AttentionAddressConflict}},
}

func TestStatusTable(t *testing.T) {
	want := `   NODE    INTERNAL-IP  EXTERNAL-IP  WRITERS   WRITTEN  TAINT  AGENT   WARNING
   node-a  10.0.0.1+1   <none>       nodeaddr  5m       no     0.1.0   -
!  node-b  <none>       <none>       -         -        yes    <none>  ProvidedNodeIPNotFo…
!  vm-2    10.0.2.15    <none>       nodeaddr  5m       no     0.1.0   -
`
	if got := render(StatusTable(rows, t0, false)); got != want {
		t.Errorf("default table:\n%s\nwant:\n%s", got, want)
	}
	wantWide := `   NODE    INTERNAL-IP       EXTERNAL-IP  WRITERS   WRITTEN               TAINT  AGENT                   READY  RESTARTS  VERSION  WARNING                                                           CONFLICT
   node-a  10.0.0.1,fd00::1  <none>       nodeaddr  2026-12-04T04:55:00Z  no     kube-system/nodeaddr-x  yes    0         0.1.0    -                                                                 -
!  node-b  <none>            <none>       -         -                     yes    <none>                  -      -         -        ProvidedNodeIPNotFound (2h ago, x4): 10.9.9.9 is not on the host  -
!  vm-2    10.0.2.15         <none>       nodeaddr  2026-12-04T04:55:00Z  no     kube-system/nodeaddr-y  yes    0         0.1.0    -                                                                 10.0.2.15 is also listed by Node vm-1
`
	if got := render(StatusTable(rows, t0, true)); got != wantWide {
		t.Errorf("wide table:\n%s\nwant:\n%s", got, wantWide)
	}
}

// TestStatusTableFits: with every default cell at its longest, a line is at most 120 columns.
func TestStatusTableFits(t *testing.T) {
	long := strings.Repeat("x", 80)
	s := NodeStatus{Node: long, InternalIPs: []string{"2001:db8:1234:5678:9abc:def0:1234:5678", "10.0.0.1"},
		ExternalIPs: []string{"2001:db8:1234:5678:9abc:def0:1234:5679"},
		Writers:     []Writer{{long, WriterOther}, {"kubelet", WriterKubelet}, {"nodeaddr", WriterNodeaddr}},
		LastWrite:   at(-9999 * 24 * time.Hour), Uninitialized: true, Agent: &AgentPod{Version: long, Ready: true},
		LastWarning: &Warning{Reason: long}, Attention: []string{AttentionNoAgent}}
	for _, line := range strings.Split(render(StatusTable([]NodeStatus{s}, t0, false)), "\n") {
		if n := utf8.RuneCountInString(line); n > 120 {
			t.Errorf("line of %d columns: %q", n, line)
		}
	}
}

func TestAge(t *testing.T) {
	for d, want := range map[time.Duration]string{
		-time.Second: "0s", 59 * time.Second: "59s", 61 * time.Second: "1m", 59 * time.Minute: "59m",
		47 * time.Hour: "47h", 48 * time.Hour: "2d", 400 * 24 * time.Hour: "400d",
	} {
		if got := Age(d); got != want {
			t.Errorf("Age(%v) = %q, want %q", d, got, want)
		}
	}
}
