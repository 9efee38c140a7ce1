package inspect

import (
	"fmt"
	"strings"
	"testing"
)

// The newest explanation record is found in either log format, among the agent's other records and
// client-go's; a log without one says so.
func TestLastExplanation(t *testing.T) {
	const older = `[{"type":"InternalIP","family":"IPv4","address":"192.0.2.2","from":"route to 8.8.8.8","chosen":true,"reason":"chosen"}]`
	const newer = `[{"type":"InternalIP","family":"IPv4","address":"192.0.2.3","from":"route to 8.8.8.8","chosen":true,"reason":"chosen"},` +
		`{"type":"InternalIP","family":"IPv6","chosen":false,"reason":"no target of this family: not published; the Node's entry of this type and family is removed"}]`
	text := func(ts, state, explain string) string {
		return fmt.Sprintf("time=%s level=INFO msg=\"addresses explained\" node=node-a state=%q explain=%q\n", ts, state, explain)
	}
	json := func(ts, state, explain string) string {
		return fmt.Sprintf(`{"time":%q,"level":"INFO","msg":"addresses explained","node":"node-a","state":%q,"explain":%q}`+"\n", ts, state, explain)
	}
	want := []string{"InternalIP IPv4 192.0.2.3 (route to 8.8.8.8): chosen",
		"InternalIP IPv6: no target of this family: not published; the Node's entry of this type and family is removed"}
	for _, tc := range []struct {
		name, log string
		ok        bool
	}{
		{"text", "time=t0 level=INFO msg=\"nodeaddr starting\" node=node-a\n" + text("t1", "[InternalIP=192.0.2.2]", older) +
			"I1204 07:52:17.943392 8643 reflector.go:1] \"addresses explained\" is not this\n" + text("t2", "[InternalIP=192.0.2.3]", newer) +
			"time=t3 level=INFO msg=\"addresses updated\" node=node-a\n", true},
		{"json", json("t1", "[InternalIP=192.0.2.2]", older) + `{"time":"t2","level":"INFO","msg":"desired addresses changed"}` + "\n" +
			json("t2", "[InternalIP=192.0.2.3]", newer), true},
		{"none", "time=t0 level=INFO msg=\"nodeaddr starting\" node=node-a\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, ok, err := LastExplanation([]byte(tc.log))
			if err != nil || ok != tc.ok {
				t.Fatalf("LastExplanation = %v, %v; want ok %v", ok, err, tc.ok)
			}
			if !ok {
				return
			}
			var got []string
			for _, l := range e.Lines {
				got = append(got, l.String())
			}
			if e.Time != "t2" || e.State != "[InternalIP=192.0.2.3]" || strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("explanation at %s of %s:\n%s\nwant at t2 of [InternalIP=192.0.2.3]:\n%s", e.Time, e.State, strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
		})
	}
}
