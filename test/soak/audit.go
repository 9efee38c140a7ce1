package soak

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"os"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

// auditRecord is one completed request to a Node, as the audit log has it: harness.AuditEvent and
// the objects the oracle compares.
type auditRecord struct {
	harness.AuditEvent
	Received       time.Time       `json:"requestReceivedTimestamp"`
	RequestObject  json.RawMessage `json:"requestObject"`
	ResponseObject json.RawMessage `json:"responseObject"`
}

func (a auditRecord) isWrite() bool {
	return a.ObjectRef != nil && a.ObjectRef.Resource == "nodes" && a.ObjectRef.Name == nodeName &&
		(a.Verb == "patch" || a.Verb == "update") && a.Stage == "ResponseComplete"
}

func (a auditRecord) ok() bool { return a.ResponseStatus != nil && a.ResponseStatus.Code < 300 }

// auditTail reads the audit log incrementally.
type auditTail struct {
	file string
	off  int64
	rest []byte
}

// next returns the Node writes completed since the last call.
func (t *auditTail) next() ([]auditRecord, error) {
	f, err := os.Open(t.file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if _, err := f.Seek(t.off, io.SeekStart); err != nil {
		return nil, err
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return nil, err
	}
	t.off += int64(len(data))
	data = append(t.rest, data...)
	end := strings.LastIndexByte(string(data), '\n') + 1
	t.rest = slices.Clone(data[end:])
	var out []auditRecord
	sc := bufio.NewScanner(strings.NewReader(string(data[:end])))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var a auditRecord
		if json.Unmarshal(sc.Bytes(), &a) == nil && a.isWrite() {
			out = append(out, a)
		}
	}
	return out, sc.Err()
}

// responseNode decodes the Node an agent write returned.
func (a auditRecord) responseNode() *corev1.Node {
	var n corev1.Node
	if len(a.ResponseObject) == 0 || json.Unmarshal(a.ResponseObject, &n) != nil || n.Name == "" {
		return nil
	}
	return &n
}

func addrsOf(n *corev1.Node, t corev1.NodeAddressType) []string {
	var out []string
	for _, a := range n.Status.Addresses {
		if a.Type == t {
			out = append(out, a.Address)
		}
	}
	return out
}

func formatAddrs(as []corev1.NodeAddress) string {
	var parts []string
	for _, a := range as {
		parts = append(parts, string(a.Type)+"="+a.Address)
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// checkWrites records the writes in the Node's history and checks each of the agent's against the
// kernel timeline (invariants 2 and 4). It returns the number of the agent's successful writes.
func (s *soak) checkWrites(recs []auditRecord) int {
	n := 0
	for _, a := range recs {
		line := fmt.Sprintf("+%s %s %s %s/%s -> %d", s.rec.since(a.Received), shortUser(a.User.Username), a.Verb,
			a.ObjectRef.Resource, a.ObjectRef.Subresource, code(a))
		if a.User.Username != harness.AgentUser || !a.ok() {
			s.rec.addHistory(line)
			continue
		}
		n++
		node := a.responseNode()
		if node == nil {
			s.rec.addHistory(line + " (no response body)")
			continue
		}
		s.rec.addHistory(line + " " + formatAddrs(node.Status.Addresses))
		if a.ObjectRef.Subresource == "status" {
			s.checkAddressWrite(a.Received, node)
		} else {
			s.checkTaintWrite(a)
		}
	}
	return n
}

func code(a auditRecord) int {
	if a.ResponseStatus == nil {
		return 0
	}
	return a.ResponseStatus.Code
}

func shortUser(u string) string {
	switch {
	case u == harness.AgentUser:
		return "nodeaddr"
	case strings.HasPrefix(u, "system:"):
		return u
	}
	return u
}

// checkAddressWrite is invariant 2 for one of the agent's address writes received at t.
func (s *soak) checkAddressWrite(t time.Time, node *corev1.Node) {
	// A request held back by a partition or a frozen agent reaches the server late; the window
	// widens by that long (the agent's decision is what the invariant is about).
	stalled := s.rec.stalledWithin(t.Add(-2*time.Minute), t)
	// The end has a sampling period's slack: a state made by another process (the kernel's own
	// promotion, a link event, duplicate address detection) is stamped from the kernel's
	// notification of it (kernelTimeline), which the oracle receives a moment after the kernel
	// sends it, or, when the notification is missed, reaches the timeline up to one period late.
	window := s.timeline.between(t.Add(-grace-2*time.Second-stalled), t.Add(300*time.Millisecond))
	byRead := s.timeline.betweenRead(t.Add(-grace-2*time.Second-stalled), t.Add(300*time.Millisecond))
	for _, typ := range []corev1.NodeAddressType{corev1.NodeInternalIP, corev1.NodeExternalIP} {
		for _, ip := range addrsOf(node, typ) {
			usable := func(k sample) bool { return k.isUsable(ip) }
			if slices.ContainsFunc(window, usable) && !slices.ContainsFunc(byRead, usable) {
				// The samples stamped by when their read began would have reported this write.
				s.rec.mu.Lock()
				s.rec.readLate++
				s.rec.mu.Unlock()
				s.rec.event("oracle", "%s=%s at +%s: usable only by the kernel's notification, not yet by when the reads began",
					typ, ip, s.rec.since(t))
			}
			if !slices.ContainsFunc(window, usable) {
				s.rec.violate(2, "the agent published %s=%s at +%s, an address the host had not had as a usable address in the %s before (kernel: %s)",
					typ, ip, s.rec.since(t), grace+2*time.Second+stalled, describe(window))
			}
		}
	}
	// A family without an InternalIP is right only when nothing usable of that family has resolved
	// for a whole grace: a usable route candidate that stayed for longer than the debounce's
	// longest delay within the last grace means the agent must have seen it (a blip it coalesced
	// away does not count).
	recent := s.timeline.between(t.Add(-grace+time.Second), t.Add(-500*time.Millisecond))
	for _, f := range []struct {
		name string
		v6   bool
		src  func(sample) string
	}{{"IPv4", false, sample.internal4}, {"IPv6", true, sample.internal6}} {
		if slices.ContainsFunc(addrsOf(node, corev1.NodeInternalIP), func(ip string) bool { return isV6(ip) == f.v6 }) {
			continue
		}
		if ip, at, ok := stableSource(recent, 1200*time.Millisecond, f.src); ok {
			s.rec.violate(2, "the agent published no %s InternalIP at +%s although the host had %s as a usable route source %s before",
				f.name, s.rec.since(t), ip, t.Sub(at).Round(10*time.Millisecond))
		}
	}
}

func isV6(ip string) bool {
	a, err := netip.ParseAddr(ip)
	return err == nil && a.Is6() && !a.Is4In6()
}

// stableSource finds a usable route candidate (src of each sample) that the samples show
// unchanged for at least d, and when it was last seen.
func stableSource(ks []sample, d time.Duration, src func(sample) string) (string, time.Time, bool) {
	for i := 0; i < len(ks); i++ {
		ip := src(ks[i])
		if ip == "" || !ks[i].isUsable(ip) {
			continue
		}
		j := i
		for j+1 < len(ks) && src(ks[j+1]) == ip && ks[j+1].isUsable(ip) {
			j++
		}
		if ks[j].At.Sub(ks[i].At) >= d {
			return ip, ks[j].At, true
		}
		i = j
	}
	return "", time.Time{}, false
}

// checkTaintWrite is invariant 4: a write of the agent's to the Node's spec never adds the
// uninitialized taint (the test ops of a JSON patch carry the old value and are skipped).
func (s *soak) checkTaintWrite(a auditRecord) {
	var ops []map[string]any
	if json.Unmarshal(a.RequestObject, &ops) != nil {
		if strings.Contains(string(a.RequestObject), harness.Uninitialized.Key) && a.Verb == "update" {
			s.rec.violate(4, "the agent updated the Node with the uninitialized taint at +%s", s.rec.since(a.Received))
		}
		return
	}
	for _, op := range ops {
		if op["op"] == "test" {
			continue
		}
		b, _ := json.Marshal(op["value"])
		if strings.Contains(string(b), harness.Uninitialized.Key) {
			s.rec.violate(4, "the agent's patch at +%s puts the uninitialized taint back: %s", s.rec.since(a.Received), b)
		}
	}
}

func describe(ks []sample) string {
	var parts []string
	for _, k := range ks {
		parts = append(parts, k.String())
	}
	if len(parts) > 6 {
		parts = append(parts[:3], append([]string{"…"}, parts[len(parts)-3:]...)...)
	}
	return strings.Join(parts, " | ")
}
