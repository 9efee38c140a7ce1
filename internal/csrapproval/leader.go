package csrapproval

import (
	"github.com/nodeaddr/nodeaddr/internal/leader"
	"github.com/nodeaddr/nodeaddr/internal/vocab"
)

// Lease is the leader Lease's client.
func (a *API) Lease(namespace, name string) leader.LeaseClient {
	return leader.NewLeaseClient(a.coord, namespace, name, vocab.ApproverFieldManager)
}

// Elector is the leader election the approver runs (internal/leader, shared with the conflict
// detector).
type Elector = leader.Elector
