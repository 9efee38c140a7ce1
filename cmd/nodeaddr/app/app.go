// Package app assembles a nodeaddr agent: one Node informer feeding the publisher and the resolver
// loop, the netlink watcher signalling the loop, and the loop publishing to the publisher (or, in a
// dry run, to a preview printer). cmd/nodeaddr builds it from flags; test/scale builds hundreds of
// agents in one process from it.
package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/nodeaddr/nodeaddr/publisher"
	"github.com/nodeaddr/nodeaddr/resolver"
	"github.com/nodeaddr/nodeaddr/resolver/discovery"
	"github.com/nodeaddr/nodeaddr/watcher"
)

// Config configures an Agent.
type Config struct {
	// NodeName is the Node the agent manages.
	NodeName string
	// Publisher configures the writes; its NodeName and Informer are set by New. Publisher.Nodes
	// nil means no cluster (--dry-run): resolved states are printed to DryRun instead.
	Publisher publisher.Config
	// Loop configures the resolver loop; its Node is set by New.
	Loop resolver.LoopConfig
	// Watcher, if set, turns kernel netlink notifications into the loop's trigger. Without it the
	// loop is triggered by Trigger alone (test/scale).
	Watcher *watcher.Config
	// Trigger is the loop's trigger when Watcher is nil.
	Trigger resolver.Trigger
	// View adjusts what the resolver takes from the Node (without --default-exclusions its pod
	// CIDRs are not excluded); nil keeps it.
	View func(resolver.NodeView) resolver.NodeView
	// DryRun receives one JSON line per change of the previewed Node when Publisher.Nodes is nil.
	DryRun io.Writer
	// Discovery, if set, discovers the ExternalIP behind NAT with STUN (--external-ip-discovery).
	Discovery *discovery.Config
}

// Agent is one assembled agent.
type Agent struct {
	cfg      Config
	informer cache.SharedIndexInformer // nil in a dry run
	pub      *publisher.Publisher      // nil in a dry run
	preview  *Preview                  // nil unless a dry run
	watcher  *watcher.Watcher          // nil without Config.Watcher
	discover *discovery.Discoverer     // nil without Config.Discovery
	loop     *resolver.Loop
}

// New assembles an agent; nothing runs until Run or RunOnce.
func New(cfg Config) *Agent {
	a := &Agent{cfg: cfg}
	if a.cfg.Loop.Policy.Managed == nil { // as resolver.NewLoop defaults it; RunOnce needs it too
		a.cfg.Loop.Policy.Managed = cfg.Loop.Managed
	}
	if a.cfg.Loop.Policy.Targets == nil {
		a.cfg.Loop.Policy.Targets = cfg.Loop.Targets
	}
	if cfg.View == nil {
		a.cfg.View = func(v resolver.NodeView) resolver.NodeView { return v }
	}
	var sink resolver.Sink
	if nodes := cfg.Publisher.Nodes; nodes != nil {
		a.informer = publisher.NewNodeInformer(nodes, cfg.NodeName)
		pc := cfg.Publisher
		pc.NodeName, pc.Informer = cfg.NodeName, a.informer
		a.pub = publisher.New(pc)
		sink = a.pub
		a.cfg.Loop.Node = a.nodeView
	} else {
		a.preview = &Preview{W: cfg.DryRun, Annotations: cfg.Publisher.Annotations,
			KeepExternalEqualInternal: cfg.Publisher.KeepExternalEqualInternal}
		sink = a.preview
	}
	trigger := cfg.Trigger
	if cfg.Watcher != nil {
		sig := watcher.NewSignal()
		a.watcher = watcher.New(*cfg.Watcher, sig)
		a.cfg.Loop.OnRouteTables = a.watcher.SetRouteTables
		trigger = sig
	}
	if cfg.Discovery != nil {
		a.discover = a.newDiscovery(*cfg.Discovery)
		a.cfg.Loop.Discovery = a.discover
	}
	a.loop = resolver.NewLoop(a.cfg.Loop, trigger, sink)
	return a
}

// nodeView reads the Node from the informer's store: the one place the Node is seen.
func (a *Agent) nodeView() (resolver.NodeView, bool) {
	o, ok, err := a.informer.GetStore().GetByKey(a.cfg.NodeName)
	if err != nil || !ok {
		return resolver.NodeView{}, false
	}
	return a.cfg.View(publisher.NodeView(o.(*corev1.Node), a.cfg.Publisher.Managed)), true
}

// Run runs the agent until ctx ends; it returns the publisher's error, if it stopped with one.
func (a *Agent) Run(ctx context.Context) error {
	// Deferred calls run last-in first-out: cancel first, then wait. The other order would wait
	// forever for the watcher and the loop when Run returns with an error while ctx is alive.
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if a.watcher != nil {
		wg.Go(func() { a.watcher.Run(ctx) })
	}
	if a.informer != nil {
		kick := func(any) { a.loop.NodeChanged() }
		if _, err := a.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: kick, UpdateFunc: func(_, o any) { kick(o) }, DeleteFunc: kick,
		}); err != nil {
			return fmt.Errorf("add node event handler: %w", err)
		}
		wg.Go(func() { a.informer.RunWithContext(ctx) })
	}
	if a.discover != nil {
		wg.Go(func() { a.discover.Run(ctx) })
	}
	wg.Go(func() { a.loop.Run(ctx) })
	if a.pub == nil {
		<-ctx.Done()
		return nil
	}
	if err := a.pub.Run(ctx); err != nil && ctx.Err() == nil {
		return err
	}
	return nil
}

// RunOnce resolves once and reconciles the Node with the result (or previews it in a dry run),
// retrying until ctx ends. It returns the state reconciled.
func (a *Agent) RunOnce(ctx context.Context) (resolver.State, error) {
	resolve := func(v resolver.NodeView) (resolver.State, error) {
		v = a.cfg.View(v)
		st, _, err := resolver.ResolvePolicy(a.cfg.Loop.Kernel, a.cfg.Loop.Policy.Excluding(v.PodCIDRs),
			resolver.State{Managed: a.cfg.Loop.Managed, Addresses: v.Addresses})
		if err == nil && a.discover != nil {
			st = resolver.WithDiscovery(onceDiscovery{ctx, a.discover}, st)
		}
		return st, err
	}
	if a.pub == nil {
		st, err := resolve(resolver.NodeView{})
		if err == nil {
			a.preview.Publish(st, time.Time{})
		}
		return st, err
	}
	return a.pub.RunOnce(ctx, resolve)
}

// Healthz reports whether the netlink subscriptions are up and the loop is not stuck (it turns at
// least once per resync interval).
func (a *Agent) Healthz() error {
	if a.watcher != nil && !a.watcher.Healthy() {
		return errors.New("netlink subscriptions not established")
	}
	if iv := a.cfg.Loop.ResyncInterval; iv > 0 {
		if idle := time.Since(a.loop.LastTurn()); idle > 3*iv+10*time.Second {
			return fmt.Errorf("resolver loop idle for %s", idle.Round(time.Second))
		}
	}
	return nil
}

// Readyz reports whether the Node is reconciled (a dry run: whether something was resolved).
func (a *Agent) Readyz() error {
	if a.pub == nil {
		if !a.preview.Resolved() {
			return errors.New("no resolution yet")
		}
		return nil
	}
	if !a.pub.Ready() {
		return errors.New("node not reconciled")
	}
	return nil
}
