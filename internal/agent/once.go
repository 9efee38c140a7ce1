package agent

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeaddr/nodeaddr/resolver"
	"github.com/nodeaddr/nodeaddr/resolver/discovery"
)

// RunOnce (--run-once) resolves once and reconciles the Node (read with GET) with the result, retrying
// until ctx ends; authorization and resolution errors are returned at once. A dry run prints it.
func (a *Agent) RunOnce(ctx context.Context) (resolver.State, error) {
	if a.pub == nil {
		var in resolver.NodeInput
		if a.apiAddrs != nil {
			in.APIServer = a.apiAddrs.listOnce(ctx)
		}
		st, err := a.resolve(ctx, in)
		if err == nil {
			a.printer.Publish(st, time.Time{})
		}
		return st, err
	}
	for {
		st, err := a.once(ctx)
		if err == nil {
			return st, nil
		}
		var rerr resolveError
		if errors.As(err, &rerr) || apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) {
			return resolver.State{}, err
		}
		if ctx.Err() != nil {
			return resolver.State{}, fmt.Errorf("%w (gave up: %w)", err, context.Cause(ctx))
		}
		t := time.NewTimer(a.pub.RetryIn(err))
		select {
		case <-ctx.Done():
			t.Stop()
			return resolver.State{}, fmt.Errorf("%w (gave up: %w)", err, context.Cause(ctx))
		case <-t.C:
		}
	}
}

// resolveError is a failed resolution: retrying cannot help, the kernel answered.
type resolveError struct{ error }

func (e resolveError) Unwrap() error { return e.error }

// once makes one attempt: read the Node into the view, resolve with it, reconcile.
func (a *Agent) once(ctx context.Context) (resolver.State, error) {
	name := a.cfg.NodeName
	n, err := a.cfg.Nodes.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return resolver.State{}, fmt.Errorf("node %q not found: %w", name, err)
	}
	if err != nil {
		return resolver.State{}, fmt.Errorf("read node %q: %w", name, err)
	}
	if err := a.informer.GetStore().Replace([]any{n}, n.ResourceVersion); err != nil {
		return resolver.State{}, fmt.Errorf("store node %q: %w", name, err)
	}
	in := resolverInputOf(n, a.cfg.Loop.Policy.Managed)
	if a.cfg.AllowPodCIDRs {
		in.PodCIDRs = nil
	}
	if a.apiAddrs != nil {
		in.APIServer = a.apiAddrs.listOnce(ctx)
	}
	st, err := a.resolve(ctx, in)
	if err != nil {
		return resolver.State{}, resolveError{err}
	}
	a.explain.observe(st)
	a.dad.observe(st)
	a.pub.Publish(st, time.Time{})
	return st, a.pub.Reconcile(ctx)
}

// resolve runs the resolver's pipeline once (resolver.Once), discovery's rounds included.
func (a *Agent) resolve(ctx context.Context, in resolver.NodeInput) (resolver.State, error) {
	var d resolver.Discovery
	if a.discover != nil {
		d = onceDiscovery{a.discover, ctx}
	}
	return resolver.Once(a.cfg.Loop.Kernel, a.cfg.Loop.Policy, d, in)
}

// onceDiscovery is discovery for RunOnce: Update runs the rounds before it returns.
type onceDiscovery struct {
	*discovery.Discoverer
	ctx context.Context
}

func (o onceDiscovery) Update(sources map[resolver.Family]netip.Addr) { o.Once(o.ctx, sources) }
