// Package explanation is the text form of an address explanation, the contract between the agent,
// which records it in the message of each AddressesUpdated Event, and kubectl nodeaddr explain,
// which reads it back (docs/plugin.md). It imports nothing of nodeaddr and builds on every platform.
//
// The first line is the change (the header). Each line after it is one Line: "+ " for a chosen
// line, "- " for any other, then Line.String() with any newline replaced by a space, in order.
// When the whole does not fit the limit, the chosen lines are kept first, then the others as room
// allows, and a last line "(N more lines: --explain)" counts those left out. The Event recorder's
// aggregation prefix "(combined from similar events): " is ignored.
package explanation

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Line is one line of an explanation (resolver.Explained); the JSON names are those of `--explain -o json`.
type Line struct {
	Type    string `json:"type"`
	Family  string `json:"family"`
	Address string `json:"address,omitempty"`
	From    string `json:"from,omitempty"`
	Chosen  bool   `json:"chosen"`
	Reason  string `json:"reason"`
}

// typeWidth is the width the address type is padded to, so the families line up.
const typeWidth = 10

// String is the line `nodeaddr --dry-run --explain` prints.
func (e Line) String() string {
	s := fmt.Sprintf("%-*s %s", typeWidth, e.Type, e.Family)
	if e.Address != "" {
		s += " " + e.Address
	}
	if e.From != "" {
		s += " (" + e.From + ")"
	}
	return s + ": " + e.Reason
}

// Message is an explanation as an Event carries it; More counts the lines left out.
type Message struct {
	Header string
	Lines  []Line
	More   int
}

const (
	chosenMark  = "+ "
	droppedMark = "- "
	// AggregatePrefix is what client-go's Event recorder puts before a folded Event's message.
	AggregatePrefix = "(combined from similar events): "
)

func moreLine(n int) string { return "(" + strconv.Itoa(n) + " more lines: --explain)" }

func text(e Line) string {
	mark := droppedMark
	if e.Chosen {
		mark = chosenMark
	}
	return mark + strings.NewReplacer("\r\n", " ", "\n", " ", "\r", " ").Replace(e.String())
}

// Format writes header and lines as one message of at most limit bytes (see the package comment);
// a header too long for the limit is cut on a UTF-8 boundary.
func Format(header string, lines []Line, limit int) string {
	header = strings.NewReplacer("\r\n", " ", "\n", " ", "\r", " ").Replace(header)
	texts := make([]string, len(lines))
	size := len(header)
	for i, l := range lines {
		texts[i] = text(l)
		size += 1 + len(texts[i])
	}
	if size <= limit {
		return strings.Join(append([]string{header}, texts...), "\n")
	}
	// Room for the count of lines left out, at its longest.
	room := limit - 1 - len(moreLine(len(lines)))
	if len(header) > room {
		header = cut(header, room)
	}
	size = len(header)
	keep := make([]bool, len(lines))
fill: // the chosen lines first, then the others, up to the first that does not fit
	for _, chosen := range []bool{true, false} {
		for i, l := range lines {
			if l.Chosen != chosen {
				continue
			}
			if size += 1 + len(texts[i]); size > room {
				break fill
			}
			keep[i] = true
		}
	}
	out := []string{header}
	for i, k := range keep {
		if k {
			out = append(out, texts[i])
		}
	}
	return strings.Join(append(out, moreLine(len(lines)-len(out)+1)), "\n")
}

// cut returns the longest prefix of s of at most n bytes that ends on a UTF-8 boundary.
func cut(s string, n int) string {
	if n <= 0 {
		return ""
	}
	for n > 0 && n < len(s) && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// ErrNoLines is returned by Parse for a message without explanation lines (an older agent's).
var ErrNoLines = errors.New("the message carries no explanation")

// Parse reads a message Format wrote. It returns ErrNoLines for a message that is a header alone.
func Parse(msg string) (Message, error) {
	msg = strings.TrimPrefix(msg, AggregatePrefix)
	rows := strings.Split(msg, "\n")
	m := Message{Header: rows[0]}
	rows = rows[1:]
	if n := len(rows); n > 0 && strings.HasPrefix(rows[n-1], "(") {
		var more int
		if _, err := fmt.Sscanf(rows[n-1], "(%d more lines: --explain)", &more); err != nil || moreLine(more) != rows[n-1] {
			return Message{}, fmt.Errorf("line %d: %q is not a count of lines left out", n+1, rows[n-1])
		}
		m.More, rows = more, rows[:n-1]
	}
	for i, r := range rows {
		l, err := parseLine(r)
		if err != nil {
			return Message{}, fmt.Errorf("line %d: %w", i+2, err)
		}
		m.Lines = append(m.Lines, l)
	}
	if len(m.Lines) == 0 && m.More == 0 {
		return Message{}, ErrNoLines
	}
	return m, nil
}

// parseLine reads a mark and a Line.String(): TYPE FAMILY[ ADDRESS][ (FROM)]: REASON (the family
// may be empty; IPv6 addresses contain colons, never spaces).
func parseLine(r string) (Line, error) {
	var l Line
	switch {
	case strings.HasPrefix(r, chosenMark):
		l.Chosen = true
	case strings.HasPrefix(r, droppedMark):
	default:
		return Line{}, fmt.Errorf("%q starts with neither %q nor %q", r, chosenMark, droppedMark)
	}
	s := r[len(chosenMark):]
	bad := func(what string) (Line, error) { return Line{}, fmt.Errorf("%q: %s", r, what) }
	typ, rest, ok := strings.Cut(s, " ")
	if !ok || typ == "" {
		return bad("no address type")
	}
	l.Type = typ
	if pad := typeWidth - len(typ); pad > 0 {
		if len(rest) < pad || strings.TrimLeft(rest[:pad], " ") != "" {
			return bad("the address type is not padded")
		}
		rest = rest[pad:]
	}
	end := strings.IndexAny(rest, " :")
	if end < 0 {
		return bad("no reason")
	}
	l.Family, rest = rest[:end], rest[end:]
	if reason, ok := strings.CutPrefix(rest, ": "); ok {
		l.Reason = reason
		return checked(l, r)
	}
	rest = rest[1:] // the space after the family
	if !strings.HasPrefix(rest, "(") {
		// An address, then ": reason" or " (from): reason". An IPv6 address may end in a colon, so
		// the token before the first space decides: "ADDR:" when it is an address and a colon.
		tok, after, _ := strings.Cut(rest, " ")
		if a, ok := strings.CutSuffix(tok, ":"); ok && validIP(a) && (!validIP(tok) || !strings.HasPrefix(after, "(")) {
			l.Address, l.Reason = a, after
			return checked(l, r)
		}
		if !validIP(tok) {
			return bad("no address where one is expected")
		}
		l.Address, rest = tok, after
		if !strings.HasPrefix(rest, "(") {
			return bad("no source or reason after the address")
		}
	}
	from, reason, ok := strings.Cut(rest[1:], "): ")
	if !ok {
		return bad("the source is not closed")
	}
	l.From, l.Reason = from, reason
	return checked(l, r)
}

func validIP(s string) bool {
	_, err := netip.ParseAddr(s)
	return err == nil
}

// checked returns l when it prints as row, else an error: Parse accepts only what Format writes.
func checked(l Line, row string) (Line, error) {
	if text(l) != row {
		return Line{}, fmt.Errorf("%q: not a line of an explanation (reads back as %q)", row, text(l))
	}
	return l, nil
}
