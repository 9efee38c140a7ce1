package watcher

// The subscription seam (tailscale netmon's osMon): the watcher opens its netlink subscriptions
// through subscriber, so its resubscribe logic runs in unit tests against a fake, without root.

import (
	"encoding/binary"
	"fmt"
	"syscall"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// subscriber opens one subscription per kind. Each call follows netlink v1.3.1's contract: on a
// receive error it calls onError and closes ch; the socket stays open until done is closed.
type subscriber interface {
	Addr(ch chan netlink.AddrUpdate, done chan struct{}, onError func(error)) error
	Route(ch chan netlink.RouteUpdate, done chan struct{}, onError func(error)) error
	Link(ch chan netlink.LinkUpdate, done chan struct{}, onError func(error)) error
	Rule(ch chan ruleUpdate, done chan struct{}, onError func(error)) error
}

// netlinkSubscriber is the kernel's subscriber.
type netlinkSubscriber struct {
	rcvbuf int // requested receive buffer (Config.ReceiveBufferSize)
}

func (s netlinkSubscriber) Addr(ch chan netlink.AddrUpdate, done chan struct{}, onError func(error)) error {
	return netlink.AddrSubscribeWithOptions(ch, done, netlink.AddrSubscribeOptions{
		ErrorCallback: onError, ReceiveBufferSize: s.rcvbuf})
}

// Route subscribes without ListExisting: on a host with a large table the dump itself would
// overflow the socket again. A resync needs only the address list and one RouteGet per target.
func (s netlinkSubscriber) Route(ch chan netlink.RouteUpdate, done chan struct{}, onError func(error)) error {
	return netlink.RouteSubscribeWithOptions(ch, done, netlink.RouteSubscribeOptions{
		ErrorCallback: onError, ReceiveBufferSize: s.rcvbuf})
}

func (s netlinkSubscriber) Link(ch chan netlink.LinkUpdate, done chan struct{}, onError func(error)) error {
	return netlink.LinkSubscribeWithOptions(ch, done, netlink.LinkSubscribeOptions{
		ErrorCallback: onError, ReceiveBufferSize: s.rcvbuf})
}

// Rule subscribes to RTM_NEWRULE and RTM_DELRULE of both families: netlink v1.3.1 has no
// RuleSubscribe, so this is its Subscribe functions' receive loop, with the same contract.
func (s netlinkSubscriber) Rule(ch chan ruleUpdate, done chan struct{}, onError func(error)) error {
	sock, err := nl.Subscribe(unix.NETLINK_ROUTE, unix.RTNLGRP_IPV4_RULE, unix.RTNLGRP_IPV6_RULE)
	if err != nil {
		return err
	}
	if s.rcvbuf != 0 {
		if err := sock.SetReceiveBufferSize(s.rcvbuf, false); err != nil {
			sock.Close()
			return err
		}
	}
	go func() {
		<-done
		sock.Close()
	}()
	go func() {
		defer close(ch)
		for {
			msgs, from, err := sock.Receive()
			if err != nil {
				onError(fmt.Errorf("receive failed: %w", err))
				return
			}
			if from.Pid != nl.PidKernel {
				continue
			}
			for _, m := range msgs {
				if u, ok := parseRule(m); ok {
					ch <- u
				}
			}
		}
	}()
	return nil
}

// ruleUpdate is one RTM_NEWRULE or RTM_DELRULE: what the rule filter needs of it.
type ruleUpdate struct {
	Type   uint16 // RTM_NEWRULE or RTM_DELRULE
	Family int
	Action int // FR_ACT_*
	Table  int // the table a FR_ACT_TO_TBL rule points at
}

// parseRule decodes a rule message: a fib_rule_hdr (laid out as an rtmsg, the action where rtmsg
// has its type) followed by attributes, of which only FRA_TABLE matters (tables above 255). ok is
// false for another message, a short one or bad attributes.
func parseRule(m syscall.NetlinkMessage) (u ruleUpdate, ok bool) {
	typ, b := m.Header.Type, m.Data
	if typ != unix.RTM_NEWRULE && typ != unix.RTM_DELRULE || len(b) < unix.SizeofRtMsg {
		return ruleUpdate{}, false
	}
	hdr := nl.DeserializeRtMsg(b)
	u = ruleUpdate{Type: typ, Family: int(hdr.Family), Action: int(hdr.Type), Table: int(hdr.Table)}
	attrs, err := nl.ParseRouteAttr(b[unix.SizeofRtMsg:])
	if err != nil {
		return ruleUpdate{}, false
	}
	for _, a := range attrs {
		if a.Attr.Type == unix.FRA_TABLE && len(a.Value) >= 4 {
			u.Table = int(binary.NativeEndian.Uint32(a.Value))
		}
	}
	return u, true
}
