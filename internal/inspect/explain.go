package inspect

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodeaddr/nodeaddr/publisher/identity"
)

// `kubectl nodeaddr explain` shows why a Node has its addresses without widening anyone's rights or
// growing the Node: the agent logs the explanation `--dry-run --explain` prints on each change of
// the addresses it publishes (one record, identity.ExplainMessage), and the plugin reads the newest
// such record from the agent pod's log (pods/log, with the operator's credentials).

// ExplainLine is one line of an explanation, with the JSON names of the agent's (resolver.Explained,
// which this package cannot import: it builds on Linux only).
type ExplainLine struct {
	Type    string `json:"type"`
	Family  string `json:"family"`
	Address string `json:"address,omitempty"`
	From    string `json:"from,omitempty"`
	Chosen  bool   `json:"chosen"`
	Reason  string `json:"reason"`
}

// String is the line as `nodeaddr --dry-run --explain` prints it (resolver.Explained.String; a test
// of the agent checks they agree).
func (e ExplainLine) String() string {
	s := fmt.Sprintf("%-10s %s", e.Type, e.Family)
	if e.Address != "" {
		s += " " + e.Address
	}
	if e.From != "" {
		s += " (" + e.From + ")"
	}
	return s + ": " + e.Reason
}

// Explanation is the newest explanation an agent logged: when, the addresses it explains, and its
// lines. Node and Pod are filled in by the caller.
type Explanation struct {
	Node  string        `json:"node"`
	Pod   string        `json:"pod"`
	Time  string        `json:"time"`
	State string        `json:"state"`
	Lines []ExplainLine `json:"lines"`
}

// LastExplanation finds the newest explanation record in an agent's log, in either log format
// (--log-format text or json). ok is false when the log has none.
func LastExplanation(log []byte) (e Explanation, ok bool, err error) {
	sc := bufio.NewScanner(bytes.NewReader(log))
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.Contains(line, identity.ExplainMessage) {
			continue
		}
		rec, found := explainRecord(line)
		if !found {
			continue
		}
		var lines []ExplainLine
		if err := json.Unmarshal([]byte(rec[identity.ExplainKey]), &lines); err != nil {
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
		if json.Unmarshal([]byte(line), &rec) != nil || rec["msg"] != identity.ExplainMessage {
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
	return rec, rec["msg"] == identity.ExplainMessage && rec[identity.ExplainKey] != ""
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
		if strings.HasPrefix(rest, `"`) {
			q, err := strconv.QuotedPrefix(rest)
			if err != nil {
				break
			}
			v, _ := strconv.Unquote(q)
			out[key], line = v, rest[len(q):]
			continue
		}
		v, after, _ := strings.Cut(rest, " ")
		out[key], line = v, after
	}
	return out
}

// AgentFor is nodeaddr's pod on node among agents (a ready one first, else the newest) and the name
// of its agent container, or nil.
func AgentFor(node string, agents []corev1.Pod) (*AgentPod, string) {
	a := agentOn(node, agents)
	if a == nil {
		return nil, ""
	}
	for i := range agents {
		if agents[i].Namespace == a.Namespace && agents[i].Name == a.Name {
			if c := agentContainer(&agents[i]); c != nil {
				return a, c.Name
			}
		}
	}
	return a, ""
}
