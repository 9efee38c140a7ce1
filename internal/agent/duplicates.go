package agent

import (
	"fmt"
	"log/slog"
	"net/netip"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/nodeaddr/nodeaddr/internal/vocab"
	"github.com/nodeaddr/nodeaddr/resolver"
)

// dadWarnings warns (an Event and a log record), once per address per agent process, about an
// address refused because duplicate address detection failed (resolver.State.DADFailed).
type dadWarnings struct {
	nodeName string
	rec      record.EventRecorder // nil: no Events (a dry run has none)
	node     *nodeView
	log      *slog.Logger

	mu     sync.Mutex
	warned map[netip.Addr]bool
}

// observe warns about each address of s.DADFailed not warned about yet; a nil d warns about nothing.
func (d *dadWarnings) observe(s resolver.State) {
	if d == nil || len(s.DADFailed) == 0 {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, a := range s.DADFailed {
		if d.warned[a.IP] {
			continue
		}
		n := d.node.Node()
		if n == nil {
			return
		}
		if d.warned == nil {
			d.warned = map[netip.Addr]bool{}
		}
		d.warned[a.IP] = true
		d.log.Warn("address refused: duplicate address detection failed", "node", d.nodeName, "address", a.IP.String(),
			"interface", a.Interface, "reason", "dad-failed")
		if d.rec != nil {
			d.rec.Event(n, corev1.EventTypeWarning, vocab.ReasonDuplicateAddress, vocab.EventMessage(dadMessage(a)))
		}
	}
}

// dadMessage is the DuplicateAddress Event's message: the address, its interface, and what to do.
func dadMessage(a resolver.Address) string {
	return fmt.Sprintf("%s on interface %s is not published: duplicate address detection failed "+
		"(the kernel flags it dadfailed: another host on the link holds it); remove it from one of the hosts "+
		"(a static address must then be added again for DAD to run)", a.IP, a.Interface)
}
