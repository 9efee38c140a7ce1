package agent

import (
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// apiWarnEvery bounds how often a failing list/watch of the Node is logged at WARN.
const apiWarnEvery = 30 * time.Second

// apiState follows the Node informer's list and watch requests, so that an unreachable API server
// is visible at the default log level and in /readyz (client-go logs them at verbosity 2 only).
type apiState struct {
	log *slog.Logger
	now func() time.Time

	mu       sync.Mutex
	err      error     // the last request's failure; nil once a request succeeds
	at       time.Time // of err
	loggedAt time.Time // of the last WARN; zero: none since the last success
	failures int       // since the last WARN
}

// observe takes the outcome of one list or watch request of the Node (newNodeInformer).
func (s *apiState) observe(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil {
		if s.err != nil && !s.loggedAt.IsZero() {
			s.log.Info("the API server answers again", "reason", "api-available")
		}
		s.err, s.loggedAt, s.failures = nil, time.Time{}, 0
		return
	}
	now := s.now()
	s.err, s.at = err, now
	s.failures++
	if !s.loggedAt.IsZero() && now.Sub(s.loggedAt) < apiWarnEvery {
		return
	}
	s.log.Warn("cannot list or watch the Node: the API server is unreachable or refuses the agent; retrying",
		"reason", "api-unavailable", "error", err.Error(), "failures", s.failures)
	s.loggedAt, s.failures = now, 0
}

// why explains a not-ready agent whose Node the informer cannot read, or returns nil.
func (s *apiState) why() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil {
		return nil
	}
	return fmt.Errorf("cannot list or watch the Node (%s ago): %w", s.now().Sub(s.at).Round(time.Second), s.err)
}
