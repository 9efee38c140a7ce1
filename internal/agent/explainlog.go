package agent

import (
	"encoding/json"
	"log/slog"
	"sync"
	"time"

	"github.com/nodeaddr/nodeaddr/publisher/identity"
	"github.com/nodeaddr/nodeaddr/resolver"
)

// explainLog logs, on each change of the addresses the agent publishes, the explanation the
// resolver's stages wrote (State.Explanation, what --dry-run --explain prints): one INFO record
// (identity.ExplainMessage) whose attribute identity.ExplainKey is the JSON array of its lines. One
// record per change, at the rate of the "desired addresses changed" record, so it is in the log at
// the default level. The contract with kubectl nodeaddr explain is the AddressesUpdated Event,
// whose message carries the same explanation (publisher, resolver/explanation); the plugin reads
// this record only when no such Event exists (Events expire after the API server's --event-ttl).
type explainLog struct {
	nodeName string
	log      *slog.Logger

	mu   sync.Mutex
	last *resolver.State
}

// observe logs the explanation of s if it differs from the last state observed.
func (x *explainLog) observe(s resolver.State) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if !resolver.Changed(x.last, s) {
		return
	}
	x.last = &s
	b, err := json.Marshal(s.Explanation)
	if err != nil {
		return // Explained has only strings and bools
	}
	x.log.Info(identity.ExplainMessage, "node", x.nodeName, "state", s.String(), identity.ExplainKey, string(b))
}

// explainedSink is the agent's sink with each change explained in the log first, and each
// address refused for a failed DAD warned about.
type explainedSink struct {
	resolver.Sink
	x   *explainLog
	dad *dadWarnings
}

func (s explainedSink) Publish(st resolver.State, since time.Time) {
	s.x.observe(st)
	s.dad.observe(st)
	s.Sink.Publish(st, since)
}
