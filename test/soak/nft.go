package soak

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

// nftTable is the soak's nftables table in the node's namespace.
const nftTable = "soak_partition"

// nftPartition drops, with nftables in the node's namespace, every packet to and from the API
// server's port (the agent's connections to it, through the namespace's relay), both ways: the
// agent's open connections stall and retransmit, its new ones time out, as behind a firewall.
func nftPartition(s *soak, r *rand.Rand, _ uplink) {
	if s.nft == "" {
		return
	}
	d := dur(r, time.Second, 20*time.Second)
	port := s.w.cp.Port
	rules := fmt.Sprintf(`table inet %[1]s {
	chain out {
		type filter hook output priority 0; policy accept;
		tcp dport %[2]d drop
		tcp sport %[2]d drop
	}
}
`, nftTable, port)
	cmd := s.w.ns.Exec(s.nft, "-f", "-")
	cmd.Stdin = strings.NewReader(rules)
	if out, err := cmd.CombinedOutput(); err != nil {
		s.rec.violate(0, "nft: %v: %s", err, out)
		return
	}
	s.rec.event("network", "nftables drops the agent's API server traffic (port %d) for %s", port, d)
	from := time.Now()
	time.Sleep(d) // fault window: the API server unreachable
	s.nftHeal()
	s.rec.stall(from, time.Now())
}

// nftHeal deletes the partition's table (nothing when there is none).
func (s *soak) nftHeal() {
	if s.nft != "" {
		s.w.ns.Exec(s.nft, "delete", "table", "inet", nftTable).Run()
	}
}

// startNft finds nft (skipping the soak, or failing it under NODEADDR_E2E=require, without it).
func (s *soak) startNft() {
	s.nft = harness.Tool(s.t, "nft", "nftables")
}
