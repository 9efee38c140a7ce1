package harness

import "testing"

func TestFreePortOutsideEphemeralRangeAndReserved(t *testing.T) {
	lo, hi := portWindow()
	seen := map[int]bool{}
	for range 20 {
		p, err := FreePort()
		if err != nil {
			t.Fatal(err)
		}
		if p < lo || p >= hi {
			t.Fatalf("FreePort() = %d, want in [%d,%d) below the ephemeral range", p, lo, hi)
		}
		if seen[p] {
			t.Fatalf("FreePort() returned %d twice", p)
		}
		seen[p] = true
		// Another open file description (as another test process would have) cannot take it.
		if f, ok, err := reservePort(ports.lockD, p); err != nil || ok {
			if f != nil {
				f.Close()
			}
			t.Fatalf("reservePort(%d) by a second owner = ok %v, err %v; want refused", p, ok, err)
		}
	}
}
