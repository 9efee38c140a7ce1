// Package leader elects one leader among the replicas of a cluster-side component (the approver,
// the remediator, the conflict detector) on a coordination.k8s.io Lease. internal/cmd/clusterside
// runs the Elector; each controller's API embeds Clients (the core group, the Lease and the Event
// sink) with its own field manager (vocab.ApproverFieldManager, the remediator's,
// vocab.ConflictsFieldManager), so the Lease's managedFields name the controller that wrote it.
package leader

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/nodeaddr/nodeaddr/internal/kube"
)

// NewLeaseClient is the client of the Lease namespace/name on c (a coordination.k8s.io/v1 client),
// writing as fieldManager.
func NewLeaseClient(c rest.Interface, namespace, name, fieldManager string) LeaseClient {
	return leaseClient{c: c, ns: namespace, name: name, manager: fieldManager}
}

type leaseClient struct {
	c                 rest.Interface
	ns, name, manager string
}

func (l leaseClient) Get(ctx context.Context) (*coordinationv1.Lease, error) {
	return l.do(ctx, l.c.Get().Name(l.name))
}

func (l leaseClient) Create(ctx context.Context, in *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	in = in.DeepCopy()
	in.Name, in.Namespace = l.name, l.ns
	return l.do(ctx, l.c.Post().
		VersionedParams(&metav1.CreateOptions{FieldManager: l.manager}, metav1.ParameterCodec).Body(in))
}

func (l leaseClient) Update(ctx context.Context, in *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	return l.do(ctx, l.c.Put().Name(l.name).
		VersionedParams(&metav1.UpdateOptions{FieldManager: l.manager}, metav1.ParameterCodec).Body(in))
}

func (l leaseClient) do(ctx context.Context, r *rest.Request) (*coordinationv1.Lease, error) {
	return kube.Do[coordinationv1.Lease](ctx, r.Namespace(l.ns).Resource("leases"))
}

// Leader election on a coordination.k8s.io Lease, the protocol of client-go's leaderelection
// (holderIdentity, renewTime + leaseDurationSeconds, optimistic concurrency on resourceVersion).
// client-go's package is not used: it links the whole clientset (see csrapproval.API), 23.5 MB stripped alone,
// more than the agent that shares this binary (20.6 MB).

// LeaseClient reads and writes one Lease.
type LeaseClient interface {
	Get(ctx context.Context) (*coordinationv1.Lease, error)
	Create(ctx context.Context, l *coordinationv1.Lease) (*coordinationv1.Lease, error)
	Update(ctx context.Context, l *coordinationv1.Lease) (*coordinationv1.Lease, error)
}

// Elector runs a function while it holds the Lease.
type Elector struct {
	Client   LeaseClient
	Identity string
	// Duration is how long a Lease stays held without renewal (15 s when 0); Renew how long the
	// leader keeps trying to renew before it gives up (10 s); Retry the interval of attempts (2 s).
	Duration, Renew, Retry time.Duration
	Logger                 *slog.Logger
}

// ErrLeaseLost is Run's error when the leader could not renew its Lease in time.
var ErrLeaseLost = errors.New("leader lease lost")

// Run waits until it acquires the Lease, then runs lead with a context that ends when the Lease is
// lost or ctx ends. It returns when lead has returned: nil when ctx ended (the Lease is released),
// ErrLeaseLost when renewal failed; the caller exits, as a lost leader must not decide.
func (e *Elector) Run(ctx context.Context, lead func(context.Context)) error {
	e.Duration = cmp.Or(e.Duration, 15*time.Second)
	e.Renew = cmp.Or(e.Renew, 10*time.Second)
	e.Retry = cmp.Or(e.Retry, 2*time.Second)
	e.Logger = cmp.Or(e.Logger, slog.New(slog.DiscardHandler))
	for acquired := false; !acquired; {
		var err error
		if acquired, err = e.tryAcquire(ctx); err != nil {
			e.Logger.Warn("leader lease not acquired", "err", err)
		}
		if !acquired && !e.wait(ctx) {
			return nil
		}
	}
	e.Logger.Info("leader lease acquired", "identity", e.Identity)
	lctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		lead(lctx)
	}()
	err := e.renewLoop(lctx)
	cancel()
	<-done
	if ctx.Err() != nil {
		e.release()
		return nil
	}
	return err
}

// wait waits Retry; false when ctx ended first.
func (e *Elector) wait(ctx context.Context) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(e.Retry):
		return true
	}
}

// renewLoop renews every Retry until ctx ends (nil) or renewal fails for longer than Renew.
func (e *Elector) renewLoop(ctx context.Context) error {
	last := time.Now()
	for e.wait(ctx) {
		ok, err := e.tryAcquire(ctx)
		if ok {
			last = time.Now()
		} else if ctx.Err() == nil && time.Since(last) > e.Renew {
			return fmt.Errorf("%w: %w", ErrLeaseLost, err)
		}
	}
	return nil
}

// tryAcquire takes or renews the Lease when it is free, expired or already ours.
func (e *Elector) tryAcquire(ctx context.Context) (bool, error) {
	now := metav1.NewMicroTime(time.Now())
	secs := int32(e.Duration / time.Second)
	l, err := e.Client.Get(ctx)
	if apierrors.IsNotFound(err) {
		l = &coordinationv1.Lease{Spec: coordinationv1.LeaseSpec{HolderIdentity: &e.Identity,
			LeaseDurationSeconds: &secs, AcquireTime: &now, RenewTime: &now}}
		_, err = e.Client.Create(ctx, l)
		return err == nil, err
	}
	if err != nil {
		return false, err
	}
	holder := deref(l.Spec.HolderIdentity)
	if holder != e.Identity && holder != "" && !expired(l, time.Now()) {
		return false, nil
	}
	l = l.DeepCopy()
	if holder != e.Identity {
		l.Spec.LeaseTransitions = new(deref(l.Spec.LeaseTransitions) + 1)
		l.Spec.AcquireTime = &now
		l.Spec.HolderIdentity = &e.Identity
	}
	l.Spec.LeaseDurationSeconds = &secs
	l.Spec.RenewTime = &now
	_, err = e.Client.Update(ctx, l)
	return err == nil, err
}

// expired: the holder has not renewed within its lease duration.
func expired(l *coordinationv1.Lease, now time.Time) bool {
	if l.Spec.RenewTime == nil || l.Spec.LeaseDurationSeconds == nil {
		return true
	}
	return now.After(l.Spec.RenewTime.Add(time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second))
}

// release gives the Lease up so that a standby takes over at once rather than after Duration.
func (e *Elector) release() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	l, err := e.Client.Get(ctx)
	if err != nil || deref(l.Spec.HolderIdentity) != e.Identity {
		return
	}
	l = l.DeepCopy()
	l.Spec.HolderIdentity, l.Spec.LeaseDurationSeconds = new(""), new(int32(1))
	if _, err := e.Client.Update(ctx, l); err != nil {
		e.Logger.Warn("leader lease not released", "err", err)
	}
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
