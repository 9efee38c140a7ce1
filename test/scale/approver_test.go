//go:build bench

package scale

// The central approver as TestScaleCSR runs it: `nodeaddr approver --leader-elect=false` assembled in
// this process as internal/cmd/approvercmd/approver.go assembles it (its client's QPS and burst, its event
// recorder, csrapproval.NewController), on a token of its own ServiceAccount and a connection of its
// own. Two additions for the measurement: its goroutines carry the pprof label component=approver, so
// a CPU profile of the process tells its CPU from the fleet's (cpuprofile_test.go), and its clientset
// counts the CSR and Node objects its informers receive.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime/pprof"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/nodeaddr/nodeaddr/internal/csrapproval"
	"github.com/nodeaddr/nodeaddr/internal/vocab"
	"github.com/nodeaddr/nodeaddr/test/harness"
)

// The approver's identity: the ServiceAccount the kubelet-serving-csr component binds and its
// policy confines.
const (
	approverNamespace = "kube-system"
	approverAccount   = "nodeaddr-approver"
	approverUser      = "system:serviceaccount:" + approverNamespace + ":" + approverAccount
)

// The approver's client settings (internal/cmd/approvercmd/approver.go).
const (
	approverQPS   = 50
	approverBurst = 100
)

// approverLabel is the value of the pprof label "component" on the approver's goroutines.
const approverLabel = "approver"

// approver is the running in-process approver. Nothing here refers to its Controller: once stopped,
// what it held is garbage, which is how stop measures its heap.
type approver struct {
	cancel context.CancelFunc
	ready  chan struct{} // closed when the informers have synced and the workers run
	done   chan error    // Run's result
	hc     *http.Client
	reg    *prometheus.Registry
	recv   *received
	log    *os.File

	// Set by the approver's goroutine before ready is closed or done is sent.
	events      record.EventBroadcaster
	cidrObjects bool
}

// startApprover starts the approver and waits until it decides.
func startApprover(ctx context.Context, t *testing.T, cp *harness.ControlPlane) *approver {
	t.Helper()
	token, err := approverToken(ctx, cp)
	if err != nil {
		t.Fatal(err)
	}
	dialer := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	cfg := &rest.Config{
		Host:            cp.Config.Host,
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{Insecure: true},
		UserAgent:       "nodeaddr-approver/scale",
		QPS:             approverQPS,
		Burst:           approverBurst,
		// Its own transport, hence its own connection, as the Deployment's pod has.
		Dial: dialer.DialContext,
	}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	logFile, err := os.Create(filepath.Join(cp.Dir, "approver.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("approver log: %s", logFile.Name())
	runCtx, cancel := context.WithCancel(ctx)
	a := &approver{cancel: cancel, ready: make(chan struct{}), done: make(chan error, 1), hc: hc,
		reg: prometheus.NewRegistry(), recv: &received{}, log: logFile}
	// Goroutines inherit their creator's labels: everything the approver starts (informers,
	// workers, the recorder, its connection's reader) is labelled.
	pprof.Do(runCtx, pprof.Labels("component", approverLabel), func(ctx context.Context) {
		go func() { a.done <- a.run(ctx, cfg) }()
	})
	select {
	case <-a.ready:
	case err := <-a.done:
		t.Fatalf("approver: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("approver: informers not synced within a minute")
	}
	return a
}

// run is the approver's `--leader-elect=false` path (internal/cmd/approvercmd/approver.go) on csrapproval.NewAPI's
// clients, its CSR and Node list-watches counting what they receive.
func (a *approver) run(ctx context.Context, cfg *rest.Config) error {
	api, err := csrapproval.NewAPI(cfg, a.hc)
	if err != nil {
		return err
	}
	src, err := api.Source(ctx)
	if err != nil {
		return err
	}
	src.CSRs = counting(src.CSRs, &a.recv.csrs)
	src.Nodes = counting(src.Nodes, &a.recv.nodes)
	b := record.NewBroadcaster(record.WithContext(ctx))
	b.StartRecordingToSink(api.EventSink())
	a.events, a.cidrObjects = b, src.ServiceCIDRs != nil
	ctrl, err := csrapproval.NewController(csrapproval.Config{
		Source: src, Metrics: csrapproval.NewMetrics(a.reg),
		Logger:   slog.New(slog.NewTextHandler(a.log, nil)),
		Recorder: b.NewRecorder(api.Scheme(), corev1.EventSource{Component: vocab.ApproverEventComponent}),
	})
	if err != nil {
		return err
	}
	run := make(chan error, 1)
	go func() { run <- ctrl.Run(ctx) }()
	for ctrl.Ready() != nil {
		select {
		case err := <-run:
			return errors.Join(err, errors.New("stopped before its informers synced"))
		case <-time.After(50 * time.Millisecond):
		}
	}
	close(a.ready)
	return <-run
}

// stop stops the approver and returns the heap it held: the live heap before less the live heap
// after (the fleet, idle meanwhile, holds its own steady).
func (a *approver) stop(t *testing.T) (heapMiB float64) {
	t.Helper()
	before := liveHeap()
	a.cancel()
	if err := <-a.done; err != nil {
		t.Errorf("approver: %v", err)
	}
	if a.events != nil {
		a.events.Shutdown()
	}
	a.hc.CloseIdleConnections()
	a.log.Close()
	after := liveHeap()
	return (float64(before) - float64(after)) / (1 << 20)
}

// approverToken returns a token of the approver's ServiceAccount. deploy/rbac.yaml creates the
// ServiceAccount; it is created here as well should the manifest not.
func approverToken(ctx context.Context, cp *harness.ControlPlane) (string, error) {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: approverAccount, Namespace: approverNamespace}}
	if _, err := cp.Admin.CoreV1().ServiceAccounts(approverNamespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("approver ServiceAccount: %w", err)
	}
	exp := int64(3600)
	tr, err := cp.Admin.CoreV1().ServiceAccounts(approverNamespace).CreateToken(ctx, approverAccount,
		&authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{ExpirationSeconds: &exp}}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("approver token: %w", err)
	}
	return tr.Status.Token, nil
}

// verdicts reads the approver's counters: "approved" and, for each reason with a count, the CSRs
// left pending for it (an Event once per CSR and reason).
func (a *approver) verdicts(t *testing.T) map[string]float64 {
	t.Helper()
	mfs, err := a.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			switch mf.GetName() {
			case "nodeaddr_csr_approved_total":
				out["approved"] += m.GetCounter().GetValue()
			case "nodeaddr_csr_pending_total":
				for _, l := range m.GetLabel() {
					if l.GetName() == "reason" && m.GetCounter().GetValue() > 0 {
						out["pending "+l.GetValue()] += m.GetCounter().GetValue()
					}
				}
			}
		}
	}
	return out
}

// received counts what the approver's informers receive: the items of LIST responses and the
// watch events (bookmarks aside), of CSRs and of Nodes. With client-go's watch-list the initial
// list arrives as watch events.
type received struct{ csrs, nodes objectCounter }

type objectCounter struct{ lists, listed, watches, events atomic.Int64 }

type objectCounts struct{ lists, listed, watches, events int64 }

type receivedCounts struct{ csrs, nodes objectCounts }

func (r *received) take() receivedCounts { return receivedCounts{r.csrs.take(), r.nodes.take()} }

func (c *objectCounter) take() objectCounts {
	return objectCounts{c.lists.Swap(0), c.listed.Swap(0), c.watches.Swap(0), c.events.Swap(0)}
}

func (c objectCounts) objects() int64 { return c.listed + c.events }

// counting is lw counting into c: a ListWatch still, as the approver's are.
func counting(from cache.ListerWatcher, c *objectCounter) *cache.ListWatch {
	lw := cache.ToListerWatcherWithContext(from)
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			l, err := lw.ListWithContext(ctx, o)
			c.lists.Add(1)
			if err == nil {
				c.listed.Add(int64(meta.LenList(l)))
			}
			return l, err
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			w, err := lw.WatchWithContext(ctx, o)
			if err != nil {
				return nil, err
			}
			c.watches.Add(1)
			return watch.Filter(w, func(e watch.Event) (watch.Event, bool) {
				if e.Type != watch.Bookmark {
					c.events.Add(1)
				}
				return e, true
			}), nil
		},
	}
}
