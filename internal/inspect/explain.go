package inspect

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/nodeaddr/nodeaddr/internal/vocab"
	"github.com/nodeaddr/nodeaddr/resolver/explanation"
)

// Explanation is the newest explanation of a Node's addresses, read without widening anyone's rights
// from the agent's AddressesUpdated Event about the Node (resolver/explanation's text form), else,
// once Events expired (--event-ttl), from the agent pod's log. The caller fills in Node, and Pod.
type Explanation struct {
	Node  string `json:"node"`
	Event string `json:"event,omitempty"` // namespace/name of the Event it was read from
	Pod   string `json:"pod,omitempty"`   // namespace/name of the agent pod whose log it was read from
	Time  string `json:"time"`
	// State is the addresses explained: as the Event's change names them ([{InternalIP 192.0.2.2}]),
	// or as the log's record does ([InternalIP=192.0.2.2]).
	State  string             `json:"state"`
	Change string             `json:"change,omitempty"` // the Event's "Addresses changed from ... to ..."
	Lines  []explanation.Line `json:"lines"`
	More   int                `json:"more,omitempty"` // lines the Event had no room for
}

// APIObject is the explained Node, for -o name.
func (e Explanation) APIObject() (schema.GroupVersionKind, string) { return nodeKind, e.Node }

// LastExplanationEvent reads the explanation from the newest of events that is nodeaddr's
// AddressesUpdated Event about node. ok is false when there is none, or when the newest carries no
// explanation (an agent older than the format): the caller then reads the agent's log.
func LastExplanationEvent(node *corev1.Node, events []corev1.Event) (e Explanation, ok bool, err error) {
	var newest *corev1.Event
	for i := range events {
		ev := &events[i]
		if ev.Reason == vocab.ReasonAddressesUpdated && ev.Source.Component == vocab.EventComponent && about(ev, node) &&
			(newest == nil || newer(ev, newest)) {
			newest = ev
		}
	}
	if newest == nil {
		return Explanation{}, false, nil
	}
	m, err := explanation.Parse(newest.Message)
	if errors.Is(err, explanation.ErrNoLines) {
		return Explanation{}, false, nil
	}
	name := newest.Namespace + "/" + newest.Name
	if err != nil {
		return Explanation{}, false, fmt.Errorf("event %s: %w", name, err)
	}
	e = Explanation{Event: name, Time: eventTime(newest).UTC().Format(time.RFC3339), Change: m.Header, Lines: m.Lines, More: m.More}
	if i := strings.LastIndex(m.Header, " to ["); i >= 0 {
		e.State = m.Header[i+len(" to "):]
	}
	return e, true, nil
}

// newer orders Events by eventTime, then by name: client-go names an Event after the Node and its
// creation time in hexadecimal nanoseconds, which tells apart two Events of the same second.
func newer(a, b *corev1.Event) bool {
	ta, tb := eventTime(a), eventTime(b)
	if !ta.Equal(&tb) {
		return tb.Before(&ta)
	}
	return a.Name > b.Name
}

// LastExplanation finds the newest explanation record in an agent's log (the fallback without an
// Event), in either log format (--log-format text or json). ok is false when the log has none.
func LastExplanation(log []byte) (e Explanation, ok bool, err error) {
	sc := bufio.NewScanner(bytes.NewReader(log))
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.Contains(line, vocab.ExplainMessage) {
			continue
		}
		rec, found := explainRecord(line)
		if !found {
			continue
		}
		var lines []explanation.Line
		if err := json.Unmarshal([]byte(rec[vocab.ExplainKey]), &lines); err != nil {
			return Explanation{}, false, fmt.Errorf("explanation logged at %s: %w", rec["time"], err)
		}
		e, ok = Explanation{Time: rec["time"], State: rec["state"], Lines: lines}, true
	}
	return e, ok, sc.Err()
}

// explainRecord returns the string attributes of line when it is an explanation record.
func explainRecord(line string) (map[string]string, bool) {
	if strings.HasPrefix(line, "{") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) != nil || rec["msg"] != vocab.ExplainMessage {
			return nil, false
		}
		out := map[string]string{}
		for k, v := range rec {
			if s, ok := v.(string); ok {
				out[k] = s
			}
		}
		return out, true
	}
	rec := logfmt(line)
	return rec, rec["msg"] == vocab.ExplainMessage && rec[vocab.ExplainKey] != ""
}

// logfmt parses a log/slog text record: key=value pairs, a value quoted (Go syntax) when it has a
// space, a quote or an equals sign. It stops at the first pair it cannot read.
func logfmt(line string) map[string]string {
	out := map[string]string{}
	for line = strings.TrimSpace(line); line != ""; line = strings.TrimLeft(line, " ") {
		key, rest, ok := strings.Cut(line, "=")
		if !ok || strings.Contains(key, " ") {
			break
		}
		v, after, _ := strings.Cut(rest, " ")
		if strings.HasPrefix(rest, `"`) {
			q, err := strconv.QuotedPrefix(rest)
			if err != nil {
				break
			}
			v, _ = strconv.Unquote(q)
			after = rest[len(q):]
		}
		out[key], line = v, after
	}
	return out
}
