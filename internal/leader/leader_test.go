package leader

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// memLease is one Lease in memory with the API server's optimistic concurrency.
type memLease struct {
	mu   sync.Mutex
	l    *coordinationv1.Lease
	rv   int
	fail bool // every request fails (the API server is unreachable)
}

var leaseGR = schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}

func (m *memLease) Get(context.Context) (*coordinationv1.Lease, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail {
		return nil, apierrors.NewServiceUnavailable("down")
	}
	if m.l == nil {
		return nil, apierrors.NewNotFound(leaseGR, "l")
	}
	return m.l.DeepCopy(), nil
}

func (m *memLease) Create(_ context.Context, l *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.l != nil {
		return nil, apierrors.NewAlreadyExists(leaseGR, "l")
	}
	m.rv++
	m.l = l.DeepCopy()
	m.l.ResourceVersion = string(rune('0' + m.rv))
	return m.l.DeepCopy(), nil
}

func (m *memLease) Update(_ context.Context, l *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail {
		return nil, apierrors.NewServiceUnavailable("down")
	}
	if m.l == nil || l.ResourceVersion != m.l.ResourceVersion {
		return nil, apierrors.NewConflict(leaseGR, "l", nil)
	}
	m.rv++
	m.l = l.DeepCopy()
	m.l.ResourceVersion = string(rune('0' + m.rv))
	return m.l.DeepCopy(), nil
}

func (m *memLease) holder() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.l == nil || m.l.Spec.HolderIdentity == nil {
		return ""
	}
	return *m.l.Spec.HolderIdentity
}

// Two replicas: one leads; the other waits while the Lease is renewed, takes over at once when the
// leader releases it on shutdown, and a leader that cannot renew stops leading and says so.
func TestElector(t *testing.T) {
	lease := &memLease{}
	fast := func(id string) *Elector {
		return &Elector{Client: lease, Identity: id, Duration: time.Second, Renew: 300 * time.Millisecond, Retry: 20 * time.Millisecond}
	}
	ctxA, stopA := context.WithCancel(context.Background())
	ledA := make(chan struct{})
	doneA := make(chan error)
	go func() { doneA <- fast("a").Run(ctxA, func(ctx context.Context) { close(ledA); <-ctx.Done() }) }()
	<-ledA
	ctxB, stopB := context.WithCancel(context.Background())
	defer stopB()
	ledB := make(chan struct{})
	doneB := make(chan error)
	go func() { doneB <- fast("b").Run(ctxB, func(ctx context.Context) { close(ledB); <-ctx.Done() }) }()
	time.Sleep(100 * time.Millisecond) // several of b's attempts
	select {
	case <-ledB:
		t.Fatal("b leads while a holds a renewed Lease")
	default:
	}
	stopA()
	if err := <-doneA; err != nil {
		t.Fatalf("a: %v", err)
	}
	<-ledB // a released the Lease: b takes it without waiting for it to expire
	if h := lease.holder(); h != "b" {
		t.Fatalf("holder %q, want b", h)
	}
	lease.mu.Lock()
	lease.fail = true
	lease.mu.Unlock()
	if err := <-doneB; err == nil || !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("b: %v, want ErrLeaseLost", err)
	}
}

// An expired Lease of another holder is taken over, counting the transition.
func TestElectorTakesAnExpiredLease(t *testing.T) {
	old := "gone"
	secs := int32(1)
	past := metav1.NewMicroTime(time.Now().Add(-time.Minute))
	lease := &memLease{l: &coordinationv1.Lease{Spec: coordinationv1.LeaseSpec{HolderIdentity: &old, LeaseDurationSeconds: &secs, RenewTime: &past}}}
	e := &Elector{Client: lease, Identity: "new", Retry: 10 * time.Millisecond}
	ctx, cancel := context.WithCancel(context.Background())
	err := e.Run(ctx, func(context.Context) { cancel() })
	if err != nil {
		t.Fatal(err)
	}
	lease.mu.Lock()
	defer lease.mu.Unlock()
	if tr := lease.l.Spec.LeaseTransitions; tr == nil || *tr != 1 {
		t.Errorf("transitions %v, want 1", tr)
	}
}
