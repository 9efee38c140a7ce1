// Package agent assembles one nodeaddr agent and owns its Node: it builds the one Node informer and
// hands its read-only view to the publisher, the resolver loop and discovery (node.go).
package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
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
	// Nodes is the Node API (internal/kube's client); nil means no cluster (--dry-run): resolved
	// states are printed to DryRun instead.
	Nodes NodeClient
	// Publisher configures the writes; New sets its NodeName, Nodes, Node and Managed.
	Publisher publisher.Config
	// Loop configures the resolver loop; New sets its Node, RouteTables and Discovery.
	Loop resolver.LoopConfig
	// Watcher, if set, turns kernel netlink notifications into the loop's trigger.
	Watcher *watcher.Config
	// Trigger is the loop's trigger when Watcher is nil.
	Trigger resolver.Trigger
	// AllowPodCIDRs keeps the Node's pod CIDRs selectable (--default-exclusions=false).
	AllowPodCIDRs bool
	// DryRun receives one JSON line per change of the previewed Node when Nodes is nil.
	DryRun io.Writer
	// Explain prints the explanation before each DryRun line (--explain); ExplainJSON as JSON (-o json).
	Explain, ExplainJSON bool
	// Discovery, if set, discovers the ExternalIP behind NAT with STUN (--external-ip-discovery).
	Discovery *discovery.Config
	// Registry, if set, gets the node gauges (gauges.go), read from the publisher when scraped.
	Registry prometheus.Registerer
	// APIServer, if set, supplies the apiserver target's addresses (apiserver.go).
	APIServer *APIServerConfig
}

// Agent is one assembled agent.
type Agent struct {
	cfg      Config
	informer cache.SharedIndexInformer // nil in a dry run
	node     *nodeView                 // the informer's Node; nil in a dry run
	synced   cache.InformerSynced      // the handler has seen the informer's initial list
	pub      *publisher.Publisher      // nil in a dry run
	printer  *printer                  // nil unless a dry run
	watcher  *watcher.Watcher          // nil without Config.Watcher
	discover *discovery.Discoverer     // nil without Config.Discovery
	loop     *resolver.Loop
	api      *apiState      // the Node informer's list/watch failures; nil in a dry run
	explain  *explainLog    // logs each change's explanation; nil in a dry run
	dad      *dadWarnings   // warns about addresses whose DAD failed; nil in a dry run
	apiAddrs *apiServerView // the apiserver target's addresses; nil without Config.APIServer
}

// New assembles an agent, its Node informer's handler included. Nothing runs until Run or RunOnce.
func New(cfg Config) (*Agent, error) {
	a := &Agent{cfg: cfg}
	a.cfg.Publisher.Managed = cfg.Loop.Policy.Managed
	if cfg.APIServer != nil {
		log := cfg.Publisher.Logger
		if log == nil {
			log = slog.New(slog.DiscardHandler)
		}
		a.apiAddrs = newAPIServerView(*cfg.APIServer, log)
	}
	var sink resolver.Sink
	if nodes := cfg.Nodes; nodes != nil {
		a.api = &apiState{log: a.cfg.Publisher.Logger, now: time.Now}
		if a.api.log == nil {
			a.api.log = slog.New(slog.DiscardHandler)
		}
		a.informer = newNodeInformer(nodes, cfg.NodeName, a.api.observe)
		a.node = &nodeView{a.informer.GetStore(), cfg.NodeName}
		pc := a.cfg.Publisher
		pc.NodeName, pc.Nodes, pc.Node = cfg.NodeName, nodes, a.node
		a.pub = publisher.New(pc)
		a.explain = &explainLog{nodeName: cfg.NodeName, log: a.api.log}
		a.dad = &dadWarnings{nodeName: cfg.NodeName, rec: cfg.Publisher.Recorder, node: a.node, log: a.api.log}
		sink = explainedSink{Sink: a.pub, x: a.explain, dad: a.dad}
		a.cfg.Loop.Node = a.resolverInput
	} else {
		a.printer = &printer{w: cfg.DryRun, annotations: cfg.Publisher.Annotations,
			explain: cfg.Explain, json: cfg.ExplainJSON}
		sink = a.printer
		if a.apiAddrs != nil {
			a.cfg.Loop.Node = func() (resolver.NodeInput, bool) {
				addrs, _ := a.apiAddrs.addresses()
				return resolver.NodeInput{APIServer: addrs}, true
			}
		}
	}
	trigger := cfg.Trigger
	if cfg.Watcher != nil {
		sig := watcher.NewSignal()
		a.watcher = watcher.New(*cfg.Watcher, sig)
		a.cfg.Loop.RouteTables = a.watcher
		trigger = sig
	}
	if cfg.Discovery != nil {
		a.discover = a.newDiscovery(*cfg.Discovery)
		a.cfg.Loop.Discovery = a.discover
	}
	a.loop = resolver.NewLoop(a.cfg.Loop, trigger, sink)
	if a.apiAddrs != nil {
		if err := a.apiAddrs.start(a.loop.NodeChanged); err != nil {
			return nil, fmt.Errorf("add endpointslice event handler: %w", err)
		}
	}
	if cfg.Registry != nil {
		if err := cfg.Registry.Register(newNodeGauges(a.NodeState())); err != nil {
			return nil, fmt.Errorf("register node gauges: %w", err)
		}
	}
	if a.informer != nil {
		reg, err := a.informer.AddEventHandler(a.nodeEvents())
		if err != nil {
			return nil, fmt.Errorf("add node event handler: %w", err)
		}
		a.synced = reg.HasSynced
	}
	return a, nil
}

// nodeEvents is the informer's one handler: the publisher's, then the loop looks at the Node again.
func (a *Agent) nodeEvents() cache.ResourceEventHandlerFuncs {
	pub := a.pub.NodeEvents()
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { pub.OnAdd(o, false); a.loop.NodeChanged() },
		UpdateFunc: func(old, o any) { pub.OnUpdate(old, o); a.loop.NodeChanged() },
		DeleteFunc: func(o any) { pub.OnDelete(o); a.loop.NodeChanged() },
	}
}

// resolverInput is what the resolver takes from the cluster (LoopConfig.Node): false while there is
// no Node, or while the API server's addresses are not settled (apiserver.go).
func (a *Agent) resolverInput() (resolver.NodeInput, bool) {
	n := a.node.Node()
	if n == nil {
		return resolver.NodeInput{}, false
	}
	in := resolverInputOf(n, a.cfg.Loop.Policy.Managed)
	if a.cfg.AllowPodCIDRs {
		in.PodCIDRs = nil
	}
	if a.apiAddrs != nil {
		var ok bool
		if in.APIServer, ok = a.apiAddrs.addresses(); !ok {
			return resolver.NodeInput{}, false
		}
	}
	return in, true
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
		wg.Go(func() { a.informer.RunWithContext(ctx) })
	}
	if a.discover != nil {
		wg.Go(func() { a.discover.Run(ctx) })
	}
	if a.apiAddrs != nil {
		wg.Go(func() { a.apiAddrs.run(ctx) })
	}
	wg.Go(func() { a.loop.Run(ctx) })
	if a.pub == nil {
		<-ctx.Done()
		return nil
	}
	if !cache.WaitForCacheSync(ctx.Done(), a.synced) {
		return nil // ctx ended
	}
	if err := a.pub.Run(ctx); err != nil && ctx.Err() == nil {
		return err
	}
	return nil
}

// NodeState is what the node gauges read at scrape time; nil in a dry run.
func (a *Agent) NodeState() NodeState {
	if a.pub == nil {
		return nil
	}
	return a.pub
}

// Healthz reports whether the netlink subscriptions are up and the loop is not stuck.
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
		if !a.printer.Resolved() {
			return errors.New("no resolution yet")
		}
		return nil
	}
	if !a.pub.Ready() {
		if err := a.api.why(); err != nil {
			return fmt.Errorf("node not reconciled: %w", err)
		}
		return errors.New("node not reconciled")
	}
	return nil
}
