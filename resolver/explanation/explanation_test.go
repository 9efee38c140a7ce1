package explanation

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

const header = "Addresses changed from [{InternalIP 192.0.2.2}] to [{InternalIP 192.0.2.3} {ExternalIP 2001:db8::}]"

// lines has every shape a line takes: with and without family, address and source, IPv6 addresses
// ending in a colon, reasons with colons and parentheses, chosen lines not first.
var lines = []Line{
	{Type: "InternalIP", Family: "IPv4", Address: "192.0.2.2", From: "interface eth0", Reason: "lower CIDR priority than 192.0.2.3"},
	{Type: "InternalIP", Family: "IPv4", Address: "192.0.2.3", From: "route to 192.0.2.1", Chosen: true, Reason: "chosen"},
	{Type: "InternalIP", Family: "IPv6", Reason: "no target of this family: not published; the Node's entry of this type and family is removed"},
	{Type: "InternalIP", From: "annotation alpha.kubernetes.io/provided-node-ip", Reason: `ignored: "x" is not an IP address (a list: a,b)`},
	{Type: "ExternalIP", Family: "IPv4", From: "route to 8.8.8.8", Reason: "no route to target"},
	{Type: "ExternalIP", Family: "IPv6", Address: "2001:db8::", From: "STUN discovery", Chosen: true, Reason: "chosen: the mapped address replaces the route source"},
	{Type: "ExternalIP", Family: "IPv6", Address: "fd00::", Reason: "(odd) a reason in parentheses"},
	{Type: "ExternalIP", Family: "IPv6", Address: "fd00::1", From: "previous address", Chosen: true, Reason: "held during removal grace (the loop's hold-down)"},
}

// The message is the change, then one line per explanation line, as --explain prints it and marked
// chosen (+) or not (-); it reads back as written.
func TestFormatParseRoundTrip(t *testing.T) {
	msg := Format(header, lines, 1024)
	want := header + `
- InternalIP IPv4 192.0.2.2 (interface eth0): lower CIDR priority than 192.0.2.3
+ InternalIP IPv4 192.0.2.3 (route to 192.0.2.1): chosen
- InternalIP IPv6: no target of this family: not published; the Node's entry of this type and family is removed
- InternalIP  (annotation alpha.kubernetes.io/provided-node-ip): ignored: "x" is not an IP address (a list: a,b)
- ExternalIP IPv4 (route to 8.8.8.8): no route to target
+ ExternalIP IPv6 2001:db8:: (STUN discovery): chosen: the mapped address replaces the route source
- ExternalIP IPv6 fd00::: (odd) a reason in parentheses
+ ExternalIP IPv6 fd00::1 (previous address): held during removal grace (the loop's hold-down)`
	if msg != want {
		t.Fatalf("message:\n%s\nwant:\n%s", msg, want)
	}
	got, err := Parse(msg)
	if err != nil {
		t.Fatal(err)
	}
	if w := (Message{Header: header, Lines: lines}); !reflect.DeepEqual(got, w) {
		t.Errorf("read back %+v, want %+v", got, w)
	}
	// The recorder's aggregation prefix is not part of the message.
	if again, err := Parse(AggregatePrefix + msg); err != nil || !reflect.DeepEqual(again, got) {
		t.Errorf("with the aggregation prefix: %+v, %v; want %+v", again, err, got)
	}
}

// A message never exceeds the limit: the chosen lines go in first, then the others in order while
// they fit, and a last line counts those left out; what is kept keeps its order and reads back.
func TestFormatBound(t *testing.T) {
	var many []Line
	for i := range 40 {
		many = append(many, Line{Type: "InternalIP", Family: "IPv4", Address: fmt.Sprintf("10.0.0.%d", i), From: "interface eth0",
			Reason: "rejected: inside an excluded network (service or pod CIDR): 10.0.0.0/24"})
	}
	many[30].Chosen, many[30].Reason, many[30].From = true, "chosen", "route to 192.0.2.1"
	for _, limit := range []int{1024, 400, 200} {
		msg := Format(header, many, limit)
		if len(msg) > limit {
			t.Errorf("limit %d: %d bytes", limit, len(msg))
		}
		m, err := Parse(msg)
		if err != nil {
			t.Fatalf("limit %d: %v\n%s", limit, err, msg)
		}
		if len(m.Lines)+m.More != len(many) || m.More == 0 {
			t.Errorf("limit %d: %d lines and %d more, want %d in all, some left out", limit, len(m.Lines), m.More, len(many))
		}
		if !strings.HasSuffix(msg, fmt.Sprintf("\n(%d more lines: --explain)", m.More)) {
			t.Errorf("limit %d: message does not end with the count:\n%s", limit, msg)
		}
		// The chosen line (the 31st), then the first of the others while they fit, in their order.
		wantLines := append(append([]Line{}, many[:len(m.Lines)-1]...), many[30])
		if !reflect.DeepEqual(m.Lines, wantLines) {
			t.Errorf("limit %d: kept\n%v\nwant\n%v", limit, m.Lines, wantLines)
		}
	}
	// The exact form at 300 bytes: the header, the chosen line, one other, the count.
	want := header + `
- InternalIP IPv4 10.0.0.0 (interface eth0): rejected: inside an excluded network (service or pod CIDR): 10.0.0.0/24
+ InternalIP IPv4 10.0.0.30 (route to 192.0.2.1): chosen
(38 more lines: --explain)`
	if got := Format(header, many, 300); got != want {
		t.Errorf("at 300 bytes:\n%s\nwant:\n%s", got, want)
	}
}

// Newlines in a line or the header (an annotation's value in a reason) cannot start a line of their
// own; a header longer than the limit is cut on a UTF-8 boundary.
func TestFormatOneLinePerLine(t *testing.T) {
	msg := Format("a\nb", []Line{{Type: "InternalIP", Reason: "ignored: \"1\n2\""}}, 1024)
	if want := "a b\n- InternalIP : ignored: \"1 2\""; msg != want {
		t.Errorf("message %q, want %q", msg, want)
	}
	long := Format(strings.Repeat("€", 400), lines, 100)
	if len(long) > 100 || !strings.HasSuffix(long, "\n(8 more lines: --explain)") || strings.ContainsRune(long, '\uFFFD') {
		t.Errorf("long header: %q", long)
	}
}

// A header alone is the message of an agent older than this format; anything else Format would not
// write is an error.
func TestParseRefuses(t *testing.T) {
	if _, err := Parse("Addresses changed from [] to [{InternalIP 192.0.2.2}]"); !errors.Is(err, ErrNoLines) {
		t.Errorf("header alone: %v, want ErrNoLines", err)
	}
	for _, msg := range []string{
		header + "\nInternalIP IPv4 192.0.2.2 (route to 192.0.2.1): chosen",
		header + "\n+ InternalIP IPv4 192.0.2.2 (route to 192.0.2.1) chosen",
		header + "\n+ InternalIP IPv4 not-an-ip: chosen",
		header + "\n+ InternalIP IPv4 192.0.2.2 (route to 192.0.2.1: chosen",
		header + "\n+ InternalIP   IPv4 192.0.2.2: chosen",
		header + "\n(some more lines: --explain)",
	} {
		if m, err := Parse(msg); err == nil {
			t.Errorf("Parse(%q) = %+v, want an error", msg, m)
		}
	}
}
