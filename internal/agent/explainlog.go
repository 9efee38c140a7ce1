package agent

import (
	"encoding/json"
	"log/slog"
	"sync"
	"time"

	"github.com/nodeaddr/nodeaddr/internal/vocab"
	"github.com/nodeaddr/nodeaddr/resolver"
)

// explainLog logs each change's explanation in one INFO record (vocab.ExplainMessage, ExplainKey),
// which kubectl nodeaddr explain reads when no AddressesUpdated Event is left (Events expire).
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
	x.log.Info(vocab.ExplainMessage, "node", x.nodeName, "state", s.String(), vocab.ExplainKey, string(b))
}

// explainedSink is the agent's sink, with the explanation logs and the DAD warnings first.
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
