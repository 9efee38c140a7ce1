//go:build bench

package scale

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"net"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

// The bystanders are the cluster's other clients while the fleet runs, as the Kubernetes
// scalability SLOs measure them: kubelets renewing their Lease every 10 s, with the kubelet's
// identity (system:node:NAME in system:nodes, so priority and fairness puts them where real
// kubelets land), and a controller (system:kube-controller-manager) that GETs one Node a second and
// LISTs every Node every 30 s.
const (
	bystanderKubelets = 50
	leaseRenewal      = 10 * time.Second
	controllerUser    = "system:kube-controller-manager"
	controllerGet     = time.Second
	controllerList    = 30 * time.Second
)

type bystanders struct {
	kubeletTokens   []string
	nodes           []string
	controllerToken string

	mu    sync.Mutex
	phase string
	order []string                        // phases in the order they began
	began []time.Time                     // when each phase of order began
	lat   map[string]map[string][]float64 // phase → call → seconds
	errs  map[string]map[string]int
}

// newBystanders adds the bystanders' static tokens to cp, which has not started: the kubelets of
// the first nodes of names, and the controller.
func newBystanders(cp *harness.ControlPlane, names []string) (*bystanders, error) {
	b := &bystanders{lat: map[string]map[string][]float64{}, errs: map[string]map[string]int{}}
	b.nodes = names[:min(bystanderKubelets, len(names))]
	for _, n := range b.nodes {
		tok, err := cp.AddToken("system:node:"+n, "system:nodes")
		if err != nil {
			return nil, err
		}
		b.kubeletTokens = append(b.kubeletTokens, tok)
	}
	var err error
	b.controllerToken, err = cp.AddToken(controllerUser)
	return b, err
}

// setPhase starts attributing latencies to phase.
func (b *bystanders) setPhase(phase string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.phase = phase
	b.order = append(b.order, phase)
	b.began = append(b.began, time.Now())
}

func (b *bystanders) record(call string, took time.Duration, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.lat[b.phase] == nil {
		b.lat[b.phase], b.errs[b.phase] = map[string][]float64{}, map[string]int{}
	}
	b.lat[b.phase][call] = append(b.lat[b.phase][call], took.Seconds())
	if err != nil {
		b.errs[b.phase][call]++
	}
}

// start grants the controller its reads and runs every bystander until ctx ends. The Nodes exist.
func (b *bystanders) start(ctx context.Context, t *testing.T, cp *harness.ControlPlane, names []string) {
	t.Helper()
	const role = "nodeaddr-scale-bystander"
	_, err := cp.Admin.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: role},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list"}}}},
		metav1.CreateOptions{})
	if err == nil {
		_, err = cp.Admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: controllerUser}}}, metav1.CreateOptions{})
	}
	if err != nil {
		t.Fatal(err)
	}
	for i, node := range b.nodes {
		// The kubelet's client settings (kubeAPIQPS 50, kubeAPIBurst 100), its own connection.
		cs := bystanderClient(t, cp.Config.Host, b.kubeletTokens[i], 50, 100)
		offset := time.Duration(i) * leaseRenewal / time.Duration(len(b.nodes))
		go b.kubelet(ctx, cs, node, offset)
	}
	go b.controller(ctx, bystanderClient(t, cp.Config.Host, b.controllerToken, 20, 30), names)
}

func bystanderClient(t *testing.T, host, token string, qps float32, burst int) kubernetes.Interface {
	t.Helper()
	dialer := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: host, BearerToken: token, UserAgent: "bystander/scale",
		TLSClientConfig: rest.TLSClientConfig{Insecure: true}, QPS: qps, Burst: burst, Dial: dialer.DialContext})
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// kubelet keeps node's Lease as the kubelet's node lease controller does: an update with its last
// copy every 10 s, a GET only after a conflict or an error.
func (b *bystanders) kubelet(ctx context.Context, cs kubernetes.Interface, node string, offset time.Duration) {
	leases := cs.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	duration := int32(40)
	lease, err := leases.Create(ctx, &coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: node},
		Spec: coordv1.LeaseSpec{HolderIdentity: &node, LeaseDurationSeconds: &duration,
			RenewTime: &metav1.MicroTime{Time: time.Now()}}}, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		lease, err = leases.Get(ctx, node, metav1.GetOptions{})
	}
	if err != nil {
		b.record("create lease", 0, err)
		return
	}
	select {
	case <-ctx.Done():
		return
	case <-time.After(offset):
	}
	tick := time.NewTicker(leaseRenewal)
	defer tick.Stop()
	for {
		lease.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
		start := time.Now()
		updated, err := leases.Update(ctx, lease, metav1.UpdateOptions{})
		if ctx.Err() != nil {
			return
		}
		b.record("update lease", time.Since(start), err)
		if err == nil {
			lease = updated
		} else {
			start = time.Now()
			got, gerr := leases.Get(ctx, node, metav1.GetOptions{})
			b.record("get lease", time.Since(start), gerr)
			if gerr == nil {
				lease = got
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// controller GETs a random Node every second and LISTs all Nodes every 30 s.
func (b *bystanders) controller(ctx context.Context, cs kubernetes.Interface, names []string) {
	get, list := time.NewTicker(controllerGet), time.NewTicker(controllerList)
	defer get.Stop()
	defer list.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-get.C:
			start := time.Now()
			_, err := cs.CoreV1().Nodes().Get(ctx, names[rand.IntN(len(names))], metav1.GetOptions{})
			if ctx.Err() == nil {
				b.record("get node", time.Since(start), err)
			}
		case <-list.C:
			start := time.Now()
			_, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
			if ctx.Err() == nil {
				b.record("list nodes", time.Since(start), err)
			}
		}
	}
}

// sloFor is the Kubernetes API call latency SLO of a call: p99 ≤ 1 s for single-object calls,
// ≤ 30 s for a cluster-scoped LIST.
func sloFor(call string) float64 {
	if strings.HasPrefix(call, "list") {
		return 30
	}
	return 1
}

// table is the bystanders' latencies by phase and call as they measured them, each p99 beside its
// SLO.
func (b *bystanders) table() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return latencyTable(b.order, b.lat, b.errs)
}

// serverTable is the same requests' latencies as kube-apiserver saw them, from receipt to response
// (the audit log's requestReceivedTimestamp and ResponseComplete stageTimestamp), which is how the
// Kubernetes SLO measures API call latency: without the time the request waited in the bystanders'
// own process, which shares this machine's cores with the in-process fleet. Watches are left out.
func (b *bystanders) serverTable(cp *harness.ControlPlane) (string, error) {
	b.mu.Lock()
	order, began := slices.Clone(b.order), slices.Clone(b.began)
	b.mu.Unlock()
	if len(began) == 0 {
		return "", nil
	}
	users := map[string]bool{controllerUser: true}
	for _, n := range b.nodes {
		users["system:node:"+n] = true
	}
	evs, err := cp.AuditSinceMatching(func(u string) bool { return users[u] }, began[0])
	if err != nil {
		return "", err
	}
	lat, errs := map[string]map[string][]float64{}, map[string]map[string]int{}
	for _, e := range evs {
		if e.Stage != "ResponseComplete" || e.Verb == "watch" || e.ObjectRef == nil {
			continue
		}
		// The last phase that began at or before the request (the first began at or before every one).
		phase := order[sort.Search(len(began), func(i int) bool { return began[i].After(e.RequestReceived) })-1]
		call := e.Verb + " " + e.ObjectRef.Resource
		if lat[phase] == nil {
			lat[phase], errs[phase] = map[string][]float64{}, map[string]int{}
		}
		lat[phase][call] = append(lat[phase][call], e.StageTimestamp.Sub(e.RequestReceived).Seconds())
		if !success(e) {
			errs[phase][call]++
		}
	}
	return latencyTable(order, lat, errs), nil
}

// latencyTable renders latencies by phase and call, each p99 beside its SLO.
func latencyTable(order []string, lat map[string]map[string][]float64, errs map[string]map[string]int) string {
	var s strings.Builder
	fmt.Fprintf(&s, "| phase | bystander call | requests | errors | p50 | p99 | max | SLO (p99) |\n| --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for _, phase := range order {
		calls := make([]string, 0, len(lat[phase]))
		for c := range lat[phase] {
			calls = append(calls, c)
		}
		slices.Sort(calls)
		for _, c := range calls {
			v := slices.Clone(lat[phase][c])
			slices.Sort(v)
			q := func(p float64) float64 { return v[min(len(v)-1, int(p*float64(len(v))))] }
			p99, verdict := q(0.99), "met"
			if p99 > sloFor(c) {
				verdict = "**missed**"
			}
			fmt.Fprintf(&s, "| %s | %s | %d | %d | %s | %s | %s | ≤ %.0f s: %s |\n", phase, c, len(v), errs[phase][c],
				ms(q(0.5)), ms(p99), ms(v[len(v)-1]), sloFor(c), verdict)
		}
	}
	return s.String()
}

func ms(sec float64) string {
	if sec < 1 {
		return fmt.Sprintf("%.0f ms", sec*1000)
	}
	return fmt.Sprintf("%.2f s", sec)
}

// flowPlacement reads kube-apiserver's priority-and-fairness counters: requests dispatched per
// FlowSchema and priority level, and rejected ones, since the server started, with each level's
// nominal seats. Empty with priority and fairness off.
func flowPlacement(ctx context.Context, t *testing.T, cp *harness.ControlPlane) string {
	t.Helper()
	raw, err := cp.Admin.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	type key struct{ schema, level string }
	dispatched, rejected := map[key]float64{}, map[key]float64{}
	seats := map[string]float64{}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		var into map[key]float64
		switch {
		case strings.HasPrefix(line, "apiserver_flowcontrol_dispatched_requests_total{"):
			into = dispatched
		case strings.HasPrefix(line, "apiserver_flowcontrol_rejected_requests_total{"):
			into = rejected
		case strings.HasPrefix(line, "apiserver_flowcontrol_nominal_limit_seats{"):
		default:
			continue
		}
		labels, value, _ := strings.Cut(line[strings.Index(line, "{")+1:], "} ")
		v, _ := strconv.ParseFloat(value, 64)
		if into == nil {
			seats[label(labels, "priority_level")] = v
			continue
		}
		into[key{label(labels, "flow_schema"), label(labels, "priority_level")}] += v
	}
	if len(dispatched) == 0 {
		return ""
	}
	keys := make([]key, 0, len(dispatched))
	for k := range dispatched {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b key) int { return cmp.Compare(dispatched[b], dispatched[a]) })
	var s strings.Builder
	s.WriteString("| FlowSchema | priority level (nominal seats) | requests dispatched | rejected |\n| --- | --- | --- | --- |\n")
	for _, k := range keys {
		fmt.Fprintf(&s, "| %s | %s (%.0f) | %.0f | %.0f |\n", k.schema, k.level, seats[k.level], dispatched[k], rejected[k])
	}
	return s.String()
}

// label returns the value of name in a Prometheus label set.
func label(labels, name string) string {
	_, v, ok := strings.Cut(labels, name+`="`)
	if !ok {
		return ""
	}
	v, _, _ = strings.Cut(v, `"`)
	return v
}

// dirMiB is the size of the files under dir.
func dirMiB(dir string) float64 {
	var size int64
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				size += fi.Size()
			}
		}
		return nil
	})
	return float64(size) / (1 << 20)
}
