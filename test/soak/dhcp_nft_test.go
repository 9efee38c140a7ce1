package soak

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// The DHCP and nftables faults do what they say: the lease change moves eth2 to the new
// reservation, the nftables partition stops a connection to the API server's port in the node's
// namespace and lets it through again once healed, and the Node converges after each.
func TestDHCPAndNftablesFaults(t *testing.T) {
	s := newSoak(t, 3)
	s.startNft()
	s.startDHCP()
	s.settle("start", time.Now(), 0)
	old := s.dhcp.reserved
	s.dhcp.change(s.freeHost(s.rng, dhcpUplink), 500*time.Millisecond)
	if s.dhcp.reserved == old || !readKernel(s.w.ns.Name).has(s.dhcp.reserved) || readKernel(s.w.ns.Name).has(old) {
		t.Fatalf("lease %s -> %s: kernel %s", old, s.dhcp.reserved, readKernel(s.w.ns.Name))
	}
	s.settle("after the lease change", time.Now(), 1)

	done := make(chan struct{})
	go func() { nftPartition(s, rand.New(rand.NewPCG(3, 2)), uplink{}); close(done) }()
	time.Sleep(500 * time.Millisecond) // fault window: the partition is in place for 500 ms before the lease moves
	addr := fmt.Sprintf("127.0.0.1:%d", s.w.cp.Port)
	if err := s.dial(addr); err == nil {
		t.Error("a connection to the API server's port went through the nftables partition")
	}
	<-done
	if err := s.dial(addr); err != nil {
		t.Errorf("after the partition: %v", err)
	}
	s.settle("after the partition", time.Now(), 1)
	s.report(t)
}

func (s *soak) dial(addr string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	c, err := s.w.ns.Dial(ctx, addr)
	if err == nil {
		c.Close()
	}
	return err
}
