package node

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	certv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeaddr/nodeaddr/internal/vocab"
	"github.com/nodeaddr/nodeaddr/test/harness"
)

// The renumbering day's bounds: after a renumbering, kubectl logs and exec work again
// within workBound with nodeaddr approving; without an approver, logs fail for failBound.
const (
	workBound = 30 * time.Second
	failBound = 60 * time.Second
	webImage  = "nodeaddr.test/webpod:e2e"
)

// The central approver (deploy/components/kubelet-serving-csr): its Deployment, the label of its
// pods, its ServiceAccount's user (the only one that may approve) and its Events' source.
const (
	approverName      = "nodeaddr-approver"
	approverSelector  = "app.kubernetes.io/name=" + approverName
	approverUser      = "system:serviceaccount:kube-system:" + approverName
	approverComponent = approverName
	csrApproved       = "KubeletServingCSRApproved"
)

// day is one hardened cluster (the API server verifies the kubelet's serving certificate, the
// kubelet bootstraps it with CSRs) with an ordinary pod behind a NodePort Service and kube-proxy
// as a host process on the node; the central approver runs as an ordinary pod on the node and
// reaches the API server through the kubernetes Service (kube-proxy carries its ClusterIP to
// apiServer, harness.ServeKubernetesService).
type day struct {
	*world
	web       string // the web pod's name
	nodePort  int
	proxy     *harness.KubeProxy
	apiServer string // the kubernetes Service's endpoint
	agentUID  string // the agent pod that started on the fresh node
}

// TestRenumberingDay is the renumbering day on one real node, in order: the fresh node with the
// base and the kubelet-serving-csr component (nodeaddr's central approver, a Deployment on the
// node's pod network, the only approver; the agent writes the approval record), kubectl logs and
// exec and a NodePort across a make-before-break and a break-before-make renumbering, the approval
// record after them, kubectl nodeaddr status and stale on what the renumberings left, the approval
// attacks against the central approver, and the contrast: the approver scaled to zero, the node
// renumbered, logs failing with x509 (stale lists the kubelet's certificate until the test approves
// its CSR).
func TestRenumberingDay(t *testing.T) {
	go harness.BuildPlugin(io.Discard) // built while the cluster starts; the first MustBuildPlugin waits for it
	d := newDay(t)
	d.startHostWeb(t) // kubectl nodeaddr's proof (day_plugin_test.go): a hostNetwork pod behind a Service
	if !t.Run("9-logs-exec-fresh-node", d.fresh) || !t.Run("9-plugin-hostnetwork-pod", d.hostWebReady) {
		return
	}
	const second, third, fourth = "192.0.2.20", "192.0.2.30", "192.0.2.40"
	ok := t.Run("9-renumber-make-before-break", func(t *testing.T) { d.renumber(t, uplinkV4, second, d.makeBeforeBreak) })
	ok = ok && t.Run("9-renumber-break-before-make", func(t *testing.T) { d.renumber(t, second, third, d.breakBeforeMake) })
	if !ok {
		return
	}
	t.Run("9-approval-record", func(t *testing.T) { d.approvalRecord(t, third) })
	t.Run("9-plugin-stale-and-fixed", func(t *testing.T) { d.staleAfterRenumbering(t, third, uplinkV4, second) })
	t.Run("9-approval-attacks", func(t *testing.T) { d.attacks(t, third) })
	t.Run("9-contrast-no-approver", func(t *testing.T) { d.contrast(t, third, fourth) })
}

// newDay starts the hardened cluster with the web pod's image on the node; the router (the
// gateway) is the NodePort's outside client.
func newDay(t *testing.T) *day {
	webTar := filepath.Join(t.TempDir(), "webpod.tar")
	err := harness.WriteImage(webTar, webImage, harness.MustBuildNode(t).Webpod, "/webpod", harness.ImageUser,
		[]string{"/webpod", "serve"})
	if err != nil {
		t.Fatal(err)
	}
	w := newWorld(t, worldOptions{cluster: harness.ClusterOptions{Hardened: true}, node: harness.NodeOptions{Images: []string{webTar}}})
	w.router.IP("addr", "add", gatewayV4+"/24", "dev", "r-eth0")
	w.ns.Sysctl("net.ipv4.conf.all.promote_secondaries", "1")
	w.ns.Sysctl("net.ipv4.conf.eth0.promote_secondaries", "1")
	return &day{world: w}
}

// makeBeforeBreak moves the uplink's IPv4 address: the new one added, then the old one deleted
// (the new one is promoted to primary).
func (d *day) makeBeforeBreak(from, to string) {
	d.ns.IP("addr", "add", to+"/24", "dev", "eth0")
	d.ns.IP("addr", "del", from+"/24", "dev", "eth0")
}

// breakBeforeMake moves it as a DHCP client does: the old one deleted (its default route goes
// with it), then the new one and the default route added.
func (d *day) breakBeforeMake(from, to string) {
	d.ns.IP("addr", "del", from+"/24", "dev", "eth0")
	d.ns.IP("addr", "add", to+"/24", "dev", "eth0")
	d.ns.IP("route", "add", "default", "via", gatewayV4, "dev", "eth0")
}

// fresh: the base plus the component on a fresh node, kube-proxy already running (as on a node
// that joined a cluster; it carries the kubernetes Service to the API server for the approver's
// pods); logs and exec of the web pod work once the central approver, running and ready on the
// node, approved the kubelet's first serving CSR, and nothing else approved any; kube-proxy serves
// the NodePort on the InternalIP.
func (d *day) fresh(t *testing.T) {
	d.t = t
	applied := d.applyWithWeb(t, nil)
	d.waitAddresses(expectedAddresses(d.node.Name))
	leader := d.waitApproverLeading(t)
	approverReady := time.Since(applied)
	harness.Eventually(d.t, 3*time.Minute, 100*time.Millisecond, "the web pod Running", func() (bool, string) {
		p := d.pod("default", "app=webpod")
		if p != nil && p.Status.Phase == corev1.PodRunning {
			d.web = p.Name
		}
		return d.web != "", podSeen(p)
	})
	harness.Eventually(d.t, 2*time.Minute, 100*time.Millisecond, "kubectl logs and exec working", func() (bool, string) { err := d.works(); return err == nil, fmt.Sprint(err) })
	working := time.Since(applied)
	approved := d.approvedServingCSRs(t)
	if len(approved) == 0 {
		t.Fatal("logs and exec work, but no kubelet-serving CSR was approved")
	}
	d.waitApprovedEvent(t, approved[0].Name)
	harness.Eventually(d.t, time.Minute, 100*time.Millisecond, "the NodePort answering on "+uplinkV4, func() (bool, string) { err := d.nodePortAnswers(uplinkV4); return err == nil, fmt.Sprint(err) })
	nodePort := time.Since(applied)
	// The kubelet gives a hostNetwork pod the Node's address as status.podIPs at the first status
	// it writes once the Node has one (the agent's pod starts before: its agent publishes it), and
	// keeps it while the pod runs.
	d.checkAgentPod(t, uplinkV4)
	report(t, "apply→approver leading and ready %s (%s), →logs+exec working %s, %d serving CSR(s) approved, all by the approver (IP SANs %v); apply→NodePort on the InternalIP %s",
		approverReady.Round(100*time.Millisecond), leader, working.Round(100*time.Millisecond), len(approved), csrIPs(&approved[0]),
		nodePort.Round(100*time.Millisecond))
}

// applyWithWeb creates the web pod's Deployment and its NodePort Service (single-stack of the one
// family in families; nil: the cluster's default), serves the kubernetes Service on the node, starts
// kube-proxy, and applies the shipped base with the kubelet-serving-csr component and args; it
// returns when the apply was started. A failed t logs the approvers.
func (d *day) applyWithWeb(t *testing.T, families []corev1.IPFamily, args ...string) time.Time {
	t.Helper()
	ctx := context.Background()
	cs := d.c.CP.Admin
	if _, err := cs.AppsV1().Deployments("default").Create(ctx, webPodDeployment(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	spec := corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Selector: map[string]string{"app": "webpod"},
		IPFamilies: families, Ports: []corev1.ServicePort{{Port: 8080, Protocol: corev1.ProtocolTCP}}}
	if families != nil {
		single := corev1.IPFamilyPolicySingleStack
		spec.IPFamilyPolicy = &single
	}
	svc, err := cs.CoreV1().Services("default").Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"}, Spec: spec}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	d.nodePort = int(svc.Spec.Ports[0].NodePort)
	t.Logf("Service web: ClusterIPs %v, NodePort %d", svc.Spec.ClusterIPs, d.nodePort)
	d.apiServer = d.node.ServeKubernetesService()
	d.proxy = d.node.StartKubeProxy()
	t.Cleanup(func() {
		if t.Failed() {
			d.logApprovers(t)
		}
	})
	applied := time.Now()
	d.kubectlAdmin("apply", "-k", d.overlayWith([]string{"kubelet-serving-csr"}, args...))
	return applied
}

// waitApproverLeading waits until every replica of the approver's Deployment is ready on the
// node and one of them holds the Lease (a leader is ready once its informers synced; a standby is
// ready at once) and returns the leader's pod name.
func (d *day) waitApproverLeading(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	cs := d.c.CP.Admin
	var leader string
	harness.Eventually(d.t, 3*time.Minute, 100*time.Millisecond, "the approver's replicas ready on the node and one leading", func() (bool, string) {
		dep, err := cs.AppsV1().Deployments("kube-system").Get(ctx, approverName, metav1.GetOptions{})
		if err != nil || dep.Spec.Replicas == nil || *dep.Spec.Replicas == 0 || dep.Status.ReadyReplicas != *dep.Spec.Replicas {
			return false, fmt.Sprintf("Deployment %s: %v", approverName, err)
		}
		lease, err := cs.CoordinationV1().Leases("kube-system").Get(ctx, approverName, metav1.GetOptions{})
		if err != nil || lease.Spec.HolderIdentity == nil {
			return false, fmt.Sprintf("Lease %s: %v", approverName, err)
		}
		holder, _, _ := strings.Cut(*lease.Spec.HolderIdentity, "_")
		for _, p := range d.approverPods() {
			if p.Name == holder && p.Spec.NodeName == d.node.Name && podReady(&p) && p.DeletionTimestamp == nil {
				leader = holder
				return true, ""
			}
		}
		return false, "the Lease held by " + holder
	})
	t.Logf("approver leading: %s", leader)
	for _, p := range d.approverPods() {
		t.Logf("approver pod %s at %s on %s: ready %v, restarts %d", p.Name, p.Status.PodIP, p.Spec.NodeName, podReady(&p), restarts(&p))
	}
	return leader
}

// logApprovers logs the approver pods' states and the last lines of their containers' logs, read
// on the node (kubectl logs needs the kubelet's serving certificate, which the approver approves).
func (d *day) logApprovers(t *testing.T) {
	for _, p := range d.approverPods() {
		t.Logf("approver pod %s at %s: phase %s, ready %v, restarts %d, statuses %+v", p.Name, p.Status.PodIP, p.Status.Phase,
			podReady(&p), restarts(&p), p.Status.ContainerStatuses)
		files, _ := filepath.Glob(filepath.Join(d.node.Dir, "pods", fmt.Sprintf("%s_%s_%s", p.Namespace, p.Name, p.UID), "*", "*.log"))
		for _, f := range files {
			b, _ := os.ReadFile(f)
			lines := strings.Split(strings.TrimSpace(string(b)), "\n")
			t.Logf("%s (last lines):\n%s", f, strings.Join(lines[max(0, len(lines)-15):], "\n"))
		}
	}
}

// approverPods lists the approver's pods.
func (d *day) approverPods() []corev1.Pod {
	pods, err := d.c.CP.Admin.CoreV1().Pods("kube-system").List(context.Background(), metav1.ListOptions{LabelSelector: approverSelector})
	if err != nil {
		return nil
	}
	return pods.Items
}

// restarts sums a pod's container restarts.
func restarts(p *corev1.Pod) int32 {
	var n int32
	for _, c := range p.Status.ContainerStatuses {
		n += c.RestartCount
	}
	return n
}

// waitApprovedEvent waits for the approver's Normal Event on the Node naming CSR name.
func (d *day) waitApprovedEvent(t *testing.T, name string) {
	t.Helper()
	ev := d.waitNodeEvent(t, csrApproved, name)
	if ev.Type != corev1.EventTypeNormal {
		t.Errorf("%s Event about %s is %s: %q", csrApproved, name, ev.Type, ev.Message)
	}
}

// waitNodeEvent waits up to 30 s for an Event with reason on the node whose message names CSR
// name, and checks that the central approver reported it.
func (d *day) waitNodeEvent(t *testing.T, reason, name string) corev1.Event {
	t.Helper()
	var found corev1.Event
	harness.Eventually(t, 30*time.Second, 100*time.Millisecond, fmt.Sprintf("a %s Event about %s on Node %s", reason, name, d.node.Name), func() (bool, string) {
		evs := d.c.CP.Events(t, d.node.Name, reason)
		for _, e := range evs {
			if strings.Contains(e.Message, name) {
				found = e
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d %s Events about other CSRs", len(evs), reason)
	})
	if found.Source.Component != approverComponent {
		t.Errorf("%s Event about %s from %q, want source component %s", reason, name, found.Source.Component, approverComponent)
	}
	return found
}

// renumber moves the uplink's IPv4 address from from to to (move changes the kernel state) and
// asserts what a user sees: kubectl logs and exec work again within workBound, the NodePort answers
// on the new address and not on the old one (put back as a secondary address, so it is still the
// host's but not the Node's), and kube-proxy restarted exactly once.
func (d *day) renumber(t *testing.T, from, to string, move func(from, to string)) dayTimes {
	d.t = t
	exits := len(d.proxy.Exits())
	tr := d.trackPhases(to)
	moved := time.Now()
	move(from, to)
	var last error
	harness.Eventually(d.t, 2*time.Minute, 100*time.Millisecond, "kubectl logs and exec working after the renumbering", func() (bool, string) {
		last = d.works()
		return last == nil, fmt.Sprint(last)
	})
	working := time.Since(moved)
	if working > workBound {
		t.Errorf("kubectl logs and exec worked again %s after the renumbering, want within %s", working, workBound)
	}
	times := tr.finish(moved)
	times.working = working
	harness.Eventually(d.t, time.Minute, 100*time.Millisecond, "the NodePort answering on "+to, func() (bool, string) { err := d.nodePortAnswers(to); return err == nil, fmt.Sprint(err) })
	times.nodePort = time.Since(moved)
	d.ns.IP("addr", "add", from+"/24", "dev", "eth0")
	if err := d.nodePortAnswers(from); err == nil {
		t.Errorf("the NodePort answers on the old address %s", from)
	}
	if got := d.node.Node(t).Status.Addresses; !hasAddress(got, to) || hasAddress(got, from) {
		t.Errorf("with %s back as a secondary address the Node's addresses are %v", from, got)
	}
	d.ns.IP("addr", "del", from+"/24", "dev", "eth0")
	d.approvedServingCSRs(t) // fails t for a CSR approved by anyone but nodeaddr
	if e := d.proxy.Exits(); len(e) > exits {
		times.proxyExit = e[exits].Sub(moved)
	}
	if n := len(d.proxy.Exits()) - exits; n != 1 {
		t.Errorf("kube-proxy restarted %d times during the renumbering, want 1 (its exits: %v)", n, d.proxy.ExitReasons())
	}
	report(t, "kernel→logs+exec working %s (%s); new CSR's IP SANs %v; kube-proxy exited %s (restarts 1), NodePort on the new address %s, refused on the old",
		working.Round(10*time.Millisecond), times, times.sans, times.proxyExit.Round(10*time.Millisecond), times.nodePort.Round(10*time.Millisecond))
	return times
}

// works runs kubectl logs and kubectl exec against the web pod: the API server's connections to
// the kubelet at the Node's InternalIP, verified against the kubelet-serving CA.
func (d *day) works() error {
	if out, err := d.tryKubectl("logs", "--tail=1", d.web); err != nil {
		return fmt.Errorf("logs: %v: %s", err, out)
	}
	out, err := d.tryKubectl("exec", d.web, "--", "/webpod", "echo", "renumbered")
	if err != nil || strings.TrimSpace(out) != "renumbered" {
		return fmt.Errorf("exec: %v: %s", err, out)
	}
	return nil
}

// tryKubectl runs kubectl as the admin and returns its output and error.
func (d *day) tryKubectl(args ...string) (string, error) {
	out, err := exec.Command(d.kubectl, append([]string{"--kubeconfig", d.admin, "--request-timeout=5s"}, args...)...).CombinedOutput()
	return string(out), err
}

// nodePortAnswers fetches the NodePort at ip (either family) from the router's namespace (an outside client) and
// checks that the web pod answered.
func (d *day) nodePortAnswers(ip string) error {
	c := d.router.HTTPClient()
	c.Timeout = time.Second
	resp, err := c.Get("http://" + net.JoinHostPort(ip, strconv.Itoa(d.nodePort)) + "/")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 256))
	if resp.StatusCode != 200 {
		return fmt.Errorf("status %d: %s", resp.StatusCode, strings.TrimSpace(string(body)))
	}
	return nil
}

// checkAgentPod waits for the agent pod's status.podIPs, records its UID (agentUnchanged compares
// later) and checks that it runs at ip, the Node's only address so far, with no restart.
func (d *day) checkAgentPod(t *testing.T, ip string) {
	t.Helper()
	var agent *corev1.Pod
	harness.Eventually(d.t, 3*time.Minute, 100*time.Millisecond, "the agent pod's status.podIPs set", func() (bool, string) {
		agent = d.agentPod()
		return agent != nil && agent.Status.PodIP != "", podSeen(agent)
	})
	d.agentUID = string(agent.UID)
	t.Logf("the agent pod %s (uid %s) at %v, restarts %d", agent.Name, agent.UID, agent.Status.PodIPs, restarts(agent))
	if agent.Status.PodIP != ip || restarts(agent) != 0 {
		t.Errorf("the agent pod %s at %q with %d restarts, want at %s (the Node's only address so far) with none", agent.Name,
			agent.Status.PodIP, restarts(agent), ip)
	}
}

// approvedServingCSRs returns the approved kubelet-serving CSRs of the node, failing t for any
// approved by someone other than the central approver: its condition's reason, and the approval
// request's user in the audit log (the approver's ServiceAccount, not an agent's).
func (d *day) approvedServingCSRs(t *testing.T) []certv1.CertificateSigningRequest {
	list, err := d.c.CP.Admin.CertificatesV1().CertificateSigningRequests().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The audit log is written before each response (--audit-log-mode=blocking): every approval
	// the list shows is in it.
	byApprover := map[string]bool{}
	for _, r := range d.audit(approverUser) {
		if r.ObjectRef != nil && r.ObjectRef.Resource == "certificatesigningrequests" && r.ObjectRef.Subresource == "approval" &&
			r.Verb == "update" && r.ResponseStatus != nil && r.ResponseStatus.Code == 200 {
			byApprover[r.ObjectRef.Name] = true
		}
	}
	var out []certv1.CertificateSigningRequest
	for _, csr := range list.Items {
		if csr.Spec.SignerName != certv1.KubeletServingSignerName || csr.Spec.Username != "system:node:"+d.node.Name {
			continue
		}
		for _, c := range csr.Status.Conditions {
			if c.Type == certv1.CertificateApproved {
				if c.Reason != "NodeaddrApproved" || !byApprover[csr.Name] {
					t.Errorf("CSR %s approved with reason %q, by the approver's ServiceAccount: %v", csr.Name, c.Reason, byApprover[csr.Name])
				}
				out = append(out, csr)
			}
		}
	}
	return out
}

func hasAddress(addrs []corev1.NodeAddress, ip string) bool {
	for _, a := range addrs {
		if a.Address == ip {
			return true
		}
	}
	return false
}

// webPodDeployment is an ordinary pod (not on the host network) that logs, can be exec'd into,
// and answers HTTP on 8080 (test/cmd/webpod).
func webPodDeployment() *appsv1.Deployment {
	return deployment("webpod", webImage, func(s *corev1.PodSpec) {
		s.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 8080}}
	})
}

// approvalRecord: after the renumberings the agent's approval record on its Node (the annotation
// nodeaddr.io/addresses, --approval-record) lists exactly the InternalIPs and ExternalIPs it
// published, in status order, with the node's current address now; the kubelet serves a
// certificate for those addresses, the one the approver approved from that record; and the agent
// pod that started on the fresh node is the one still running, never restarted.
func (d *day) approvalRecord(t *testing.T, now string) {
	d.t = t
	n := d.node.Node(t)
	var published []string
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP || a.Type == corev1.NodeExternalIP {
			published = append(published, a.Address)
		}
	}
	record := n.Annotations[vocab.RecordAnnotation]
	if want := strings.Join(published, ","); record != want || !slices.Contains(published, now) {
		t.Errorf("approval record %s=%q, want %q (the published addresses, with %s)", vocab.RecordAnnotation, record, want, now)
	}
	var serving []string
	harness.Eventually(d.t, time.Minute, 100*time.Millisecond, "the kubelet serving a certificate for "+now, func() (bool, string) {
		serving = d.servingIPs(now)
		return !slices.ContainsFunc(published, func(ip string) bool { return !slices.Contains(serving, ip) }), fmt.Sprintf("serving %v", serving)
	})
	d.agentUnchanged(t)
	report(t, "record %s=%q on the Node; the kubelet serves IP SANs %v; the fresh node's agent pod still running, 0 restarts",
		vocab.RecordAnnotation, record, serving)
}

// agentUnchanged fails t unless the agent pod running now is the one that started on the fresh
// node, with no container restart: nodeaddr covered the node all day.
func (d *day) agentUnchanged(t *testing.T) {
	t.Helper()
	p := d.agentPod()
	if p == nil {
		t.Fatal("no agent pod")
	}
	t.Logf("the agent pod %s (uid %s) at %q, restarts %d, created %s", p.Name, p.UID, p.Status.PodIP, restarts(p), p.CreationTimestamp.UTC().Format(time.RFC3339))
	if string(p.UID) != d.agentUID || restarts(p) != 0 {
		t.Errorf("the agent pod is %s (uid %s, %d restarts, statuses %+v), want the fresh node's (uid %s) never restarted",
			p.Name, p.UID, restarts(p), p.Status.ContainerStatuses, d.agentUID)
	}
	for _, a := range d.approverPods() {
		t.Logf("approver pod %s (uid %s) at %s: ready %v, restarts %d", a.Name, a.UID, a.Status.PodIP, podReady(&a), restarts(&a))
	}
}
