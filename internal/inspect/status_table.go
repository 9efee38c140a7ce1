package inspect

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// The status table: its columns and cells, as kubectl nodeaddr status prints them.

// Marker flags a row that needs an operator (NodeStatus.Attention).
const Marker = "!"

// statusColumn is one column of the status table and the width a default (not wide) cell is cut to.
type statusColumn struct {
	header string
	max    int // 0: only in -o wide
	cell   func(s NodeStatus, now time.Time, wide bool) string
}

// The default widths add up, with two spaces between columns, to 119 (TestStatusTableFits).
var statusColumns = []statusColumn{
	{"", 1, func(s NodeStatus, _ time.Time, _ bool) string {
		if len(s.Attention) > 0 {
			return Marker
		}
		return ""
	}},
	{"NODE", 20, func(s NodeStatus, _ time.Time, _ bool) string { return s.Node }},
	{"INTERNAL-IP", 17, func(s NodeStatus, _ time.Time, wide bool) string { return ipList(s.InternalIPs, wide) }},
	{"EXTERNAL-IP", 15, func(s NodeStatus, _ time.Time, wide bool) string { return ipList(s.ExternalIPs, wide) }},
	{"WRITERS", 10, writersCell},
	{"WRITTEN", 7, func(s NodeStatus, now time.Time, wide bool) string {
		if s.LastWrite == nil {
			return none
		}
		if wide {
			return s.LastWrite.UTC().Format(time.RFC3339)
		}
		return Age(now.Sub(s.LastWrite.Time))
	}},
	{"TAINT", 5, func(s NodeStatus, _ time.Time, _ bool) string { return yesNo(s.Uninitialized) }},
	{"AGENT", 8, func(s NodeStatus, _ time.Time, wide bool) string {
		switch {
		case s.Agent == nil:
			return "<none>"
		case wide:
			return s.Agent.Namespace + "/" + s.Agent.Name
		case !s.Agent.Ready:
			return "NotReady"
		}
		return s.Agent.Version
	}},
	{"READY", 0, agentCell(func(a *AgentPod) string { return yesNo(a.Ready) })},
	{"RESTARTS", 0, agentCell(func(a *AgentPod) string { return strconv.Itoa(int(a.Restarts)) })},
	{"VERSION", 0, agentCell(func(a *AgentPod) string { return a.Version })},
	{"WARNING", 20, func(s NodeStatus, now time.Time, wide bool) string {
		if s.LastWarning == nil {
			return none
		}
		if !wide {
			return s.LastWarning.Reason
		}
		return fmt.Sprintf("%s (%s ago, x%d): %s", s.LastWarning.Reason, Age(now.Sub(s.LastWarning.Time.Time)),
			s.LastWarning.Count, s.LastWarning.Message)
	}},
	{"CONFLICT", 0, func(s NodeStatus, _ time.Time, _ bool) string { return cmp.Or(s.Conflict, none) }},
}

const none = "-"

// agentCell is a column of the agent pod, "-" without one.
func agentCell(cell func(a *AgentPod) string) func(NodeStatus, time.Time, bool) string {
	return func(s NodeStatus, _ time.Time, _ bool) string {
		if s.Agent == nil {
			return none
		}
		return cell(s.Agent)
	}
}

// StatusTable is the status table, header first: the default columns cut to fit, or every one in full.
func StatusTable(rows []NodeStatus, now time.Time, wide bool) [][]string {
	table := make([][]string, len(rows)+1)
	for _, c := range statusColumns {
		if !wide && c.max == 0 {
			continue
		}
		table[0] = append(table[0], c.header)
		for i, s := range rows {
			cell := c.cell(s, now, wide)
			if !wide {
				cell = cut(cell, c.max)
			}
			table[i+1] = append(table[i+1], cell)
		}
	}
	return table
}

// ipList shows every address in wide output; else the first and how many more.
func ipList(ips []string, wide bool) string {
	switch {
	case len(ips) == 0:
		return "<none>"
	case wide || len(ips) == 1:
		return strings.Join(ips, ",")
	}
	return fmt.Sprintf("%s+%d", ips[0], len(ips)-1)
}

// writersCell shows the writer kinds, or in wide output the field managers' names.
func writersCell(s NodeStatus, _ time.Time, wide bool) string {
	if len(s.Writers) == 0 {
		return none
	}
	var out []string
	for _, w := range s.Writers {
		v := w.Kind
		if wide {
			v = w.Manager
		}
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return strings.Join(out, ",")
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// cut shortens s to max characters, ending in "…" when it had to.
func cut(s string, max int) string {
	if utf8.RuneCountInString(s) <= max {
		return s
	}
	r := []rune(s)
	return string(r[:max-1]) + "…"
}

// Age is a duration as kubectl's AGE column prints it, in at most four characters: 45s, 12m, 5h,
// 3d, 400d. A negative duration (clock skew) is 0s.
func Age(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d/time.Minute))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d/time.Hour))
	}
	return fmt.Sprintf("%dd", int(d/(24*time.Hour)))
}
