package publisher

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// An Event message is kept within 1024 bytes, cut where a UTF-8 character begins.
func TestEventMessage(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		want int
	}{
		{"short", "ok", 2},
		{"exactly the limit", strings.Repeat("a", 1024), 1024},
		{"longer", strings.Repeat("a", 2000), 1024},
		{"a character across the cut", strings.Repeat("a", 1020) + "€€€", 1023},
	} {
		got := EventMessage(tc.in)
		if len(got) != tc.want || !utf8.ValidString(got) {
			t.Errorf("%s: %d bytes (valid UTF-8: %v), want %d", tc.name, len(got), utf8.ValidString(got), tc.want)
		}
	}
}
