//go:build bench

package scale

// TestScaleRemediation: the remediator at fleet size. N Nodes (NODEADDR_SCALE_NODES, default 500)
// with one running hostNetwork pod each, written as a kubelet would; the remediator assembled in
// this process as internal/cmd/remediatorcmd/remediator.go assembles it (remediation.NewAPI on a token of its own
// ServiceAccount, its informers counting what they receive); 10% of the Nodes renumbered at once.
// A kubelet stand-in completes each evicted pod's deletion 200 ms after it sees it terminating and
// records how many were terminating at once. Reported: the time until every stale pod is gone, the
// evictions in flight at most (bound: --max-evictions), the remediator's LISTs (one per informer)
// and objects received, and its heap.
//
//	cd test && go test -tags bench ./scale/ -run TestScaleRemediation -v -count=1 -timeout 30m

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"

	"github.com/nodeaddr/nodeaddr/internal/remediation"
	"github.com/nodeaddr/nodeaddr/internal/vocab"
	"github.com/nodeaddr/nodeaddr/test/harness"
)

const (
	remediationMaxInFlight = 10
	remediationGrace       = 2 * time.Second
	kubeletFinishAfter     = 200 * time.Millisecond
)

func TestScaleRemediation(t *testing.T) {
	n := 500
	if v, err := strconv.Atoi(os.Getenv("NODEADDR_SCALE_NODES")); err == nil && v > 0 {
		n = v
	}
	cp := harness.StartControlPlane(t)
	ctx := t.Context()
	cp.ApplyRBAC(t)
	for _, f := range []string{"rbac.yaml", "policy.yaml"} {
		if err := cp.ApplyManifest(ctx, filepath.Join(harness.RepoDir(), "deploy", "components", "pod-remediation", f)); err != nil {
			t.Fatal(err)
		}
	}
	fast := rest.CopyConfig(cp.Config)
	fast.QPS, fast.Burst = 1000, 2000
	admin, err := kubernetes.NewForConfig(fast)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	inParallel(t, n, func(i int) error { return createNodeAndPod(ctx, admin, i) })
	t.Logf("%d Nodes and hostNetwork pods written in %s", n, time.Since(start).Round(time.Millisecond))

	k := &standIn{}
	w, err := admin.CoreV1().Pods("default").Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	go k.run(ctx, admin, w)

	heapBefore := liveHeap()
	var nodes, pods objectCounter
	var evictions atomic.Int64
	token := cp.ServiceAccountToken(t, "nodeaddr-remediator")
	cfg := &rest.Config{Host: cp.Config.Host, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{Insecure: true}, QPS: 20, Burst: 40}
	api, err := remediation.NewAPI(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	src := api.Source()
	src.Nodes, src.Pods = counting(src.Nodes, &nodes), counting(src.Pods, &pods)
	evict := src.Evict
	src.Evict = func(ctx context.Context, p *corev1.Pod) error { evictions.Add(1); return evict(ctx, p) }
	b := record.NewBroadcaster(record.WithContext(ctx))
	b.StartRecordingToSink(api.EventSink())
	defer b.Shutdown()
	ctrl, err := remediation.NewController(remediation.Config{Source: src, Metrics: remediation.NewMetrics(prometheus.NewRegistry()),
		Logger: slog.New(slog.DiscardHandler), Grace: remediationGrace, MaxPerNode: 1, MaxInFlight: remediationMaxInFlight,
		Recorder: b.NewRecorder(api.Scheme(), corev1.EventSource{Component: vocab.RemediatorEventComponent})})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- ctrl.Run(runCtx) }()
	harness.Eventually(t, time.Minute, 50*time.Millisecond, "remediator synced", func() (bool, string) { return ctrl.Ready() == nil, "" })
	synced := nodes.take()
	syncedPods := pods.take()

	renumbered := n / 10
	start = time.Now()
	inParallel(t, renumbered, func(i int) error { return renumber(ctx, admin, i) })
	wrote := time.Since(start)
	harness.Eventually(t, 30*time.Minute, 200*time.Millisecond, "every stale pod evicted and gone", func() (bool, string) {
		got := k.finished.Load()
		return got >= int64(renumbered), fmt.Sprintf("%d of %d", got, renumbered)
	})
	took := time.Since(start)
	heap := float64(liveHeap()-min(liveHeap(), heapBefore)) / (1 << 20)
	after, afterPods := nodes.take(), pods.take()
	stop()
	if err := <-done; err != nil {
		t.Error(err)
	}
	if got := evictions.Load(); got != int64(renumbered) {
		t.Errorf("%d evictions, want %d (one per stale pod)", got, renumbered)
	}
	if max := k.maxTerminating.Load(); max > remediationMaxInFlight {
		t.Errorf("%d pods terminating at once, over --max-evictions=%d", max, remediationMaxInFlight)
	}
	if after.lists != 0 || afterPods.lists != 0 {
		t.Errorf("LISTs after the informers' start: nodes %d, pods %d", after.lists, afterPods.lists)
	}
	report := fmt.Sprintf(`| Nodes (one hostNetwork pod each) | renumbered at once | grace | --max-evictions | evictions | at most terminating at once | renumbering written | all stale pods gone | remediator LISTs, WATCHes (start / after) | objects received (start / after) | remediator heap |
| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |
| %d | %d | %s | %d | %d | %d | %s | %s | %d, %d / %d, %d | %d / %d | %.1f MiB |
`, n, renumbered, remediationGrace, remediationMaxInFlight, evictions.Load(), k.maxTerminating.Load(), wrote.Round(time.Millisecond),
		took.Round(time.Millisecond), synced.lists+syncedPods.lists, synced.watches+syncedPods.watches,
		after.lists+afterPods.lists, after.watches+afterPods.watches,
		synced.objects()+syncedPods.objects(), after.objects()+afterPods.objects(), heap)
	t.Log("\n" + report)
	if out := os.Getenv("NODEADDR_BENCH_OUT"); out != "" {
		if err := os.WriteFile(out, []byte(report), 0o644); err != nil {
			t.Error(err)
		}
	}
}

func scaleNode(i int) string { return fmt.Sprintf("rn-%05d", i) }
func nodeIP(i, gen int) string {
	return fmt.Sprintf("10.%d.%d.%d", 64+gen, i/250, i%250+1)
}

func createNodeAndPod(ctx context.Context, c kubernetes.Interface, i int) error {
	name := scaleNode(i)
	node, err := c.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: nodeIP(i, 0)}, {Type: corev1.NodeHostName, Address: name}}
	if _, err := c.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		return err
	}
	p, err := c.CoreV1().Pods("default").Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "agent-" + name, OwnerReferences: []metav1.OwnerReference{
			{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "agent", UID: "0b1a6b7e-0000-4000-8000-000000000009", Controller: new(true)}}},
		Spec: corev1.PodSpec{NodeName: name, HostNetwork: true, Containers: []corev1.Container{{Name: "c", Image: "example.invalid/c"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	ip := nodeIP(i, 0)
	p.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}},
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
	_, err = c.CoreV1().Pods("default").UpdateStatus(ctx, p, metav1.UpdateOptions{})
	return err
}

func renumber(ctx context.Context, c kubernetes.Interface, i int) error {
	node, err := c.CoreV1().Nodes().Get(ctx, scaleNode(i), metav1.GetOptions{})
	if err != nil {
		return err
	}
	node.Status.Addresses[0].Address = nodeIP(i, 1)
	_, err = c.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
	return err
}

// inParallel runs f(0..n-1) on 32 workers, failing t on the first error.
func inParallel(t *testing.T, n int, f func(int) error) {
	t.Helper()
	var wg sync.WaitGroup
	var first atomic.Pointer[error]
	next := atomic.Int64{}
	for range 32 {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				if err := f(i); err != nil {
					first.CompareAndSwap(nil, &err)
					return
				}
			}
		})
	}
	wg.Wait()
	if e := first.Load(); e != nil {
		t.Fatal(*e)
	}
}

// standIn completes evicted pods' deletions as their kubelets would, kubeletFinishAfter after it
// sees them terminating, and counts how many were terminating at once.
type standIn struct {
	terminating, maxTerminating, finished atomic.Int64
	mu                                    sync.Mutex
	seen                                  map[string]bool
}

func (k *standIn) run(ctx context.Context, c kubernetes.Interface, w watch.Interface) {
	k.seen = map[string]bool{}
	for ev := range w.ResultChan() {
		p, ok := ev.Object.(*corev1.Pod)
		if !ok || ev.Type == watch.Deleted || p.DeletionTimestamp == nil {
			continue
		}
		k.mu.Lock()
		dup := k.seen[p.Name]
		k.seen[p.Name] = true
		k.mu.Unlock()
		if dup {
			continue
		}
		now := k.terminating.Add(1)
		for m := k.maxTerminating.Load(); now > m && !k.maxTerminating.CompareAndSwap(m, now); m = k.maxTerminating.Load() {
		}
		time.AfterFunc(kubeletFinishAfter, func() {
			k.terminating.Add(-1)
			if err := c.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64(0))}); err == nil {
				k.finished.Add(1)
			}
		})
	}
}
