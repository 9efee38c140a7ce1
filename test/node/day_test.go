package node

import (
	"context"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	certv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

// The renumbering day's bounds (issue 32): after a renumbering, kubectl logs and exec work again
// within workBound with nodeaddr approving; without an approver, logs fail for failBound.
const (
	workBound = 30 * time.Second
	failBound = 60 * time.Second
	webImage  = "nodeaddr.test/webpod:e2e"
)

// day is one hardened cluster (the API server verifies the kubelet's serving certificate, the
// kubelet bootstraps it with CSRs) with an ordinary pod behind a NodePort Service and kube-proxy
// as a host process on the node.
type day struct {
	*world
	web      string // the web pod's name
	nodePort int
	proxy    *harness.KubeProxy
}

// TestRenumberingDay is issue 32's day on one real node, in order: the fresh node with the base and
// the kubelet-serving-csr component (nodeaddr the only approver), kubectl logs and exec and a
// NodePort across a make-before-break and a break-before-make renumbering, kubectl nodeaddr status
// and stale on what the renumberings left (issue 25), the approval attacks, and the contrast: the
// agent without the approval flag, renumbered, logs failing with x509 (stale lists the kubelet's
// certificate until the test approves its CSR).
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
	t.Run("9-kubelet-certificate-read", d.kubeletCertRead)
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
	w := newWorldWith(t, harness.KubernetesVersion, harness.ClusterOptions{Hardened: true},
		harness.NodeOptions{Images: []string{webTar}}, nil)
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

// fresh: the base plus the component on a fresh node; logs and exec of the web pod work once
// nodeaddr approved the kubelet's first serving CSR, and nothing else approved any; kube-proxy
// then serves the NodePort on the InternalIP.
func (d *day) fresh(t *testing.T) {
	d.t = t
	ctx := context.Background()
	cs := d.c.CP.Admin
	if _, err := cs.AppsV1().Deployments("default").Create(ctx, webPodDeployment(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	svc, err := cs.CoreV1().Services("default").Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Selector: map[string]string{"app": "webpod"},
			Ports: []corev1.ServicePort{{Port: 8080, Protocol: corev1.ProtocolTCP}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	d.nodePort = int(svc.Spec.Ports[0].NodePort)
	applied := time.Now()
	d.kubectlAdmin("apply", "-k", d.overlayWith([]string{"kubelet-serving-csr"}))
	d.waitAddresses(expectedAddresses(d.node.Name))
	d.waitFor("the web pod Running", 3*time.Minute, func() bool {
		p := d.pod("default", "app=webpod")
		if p != nil && p.Status.Phase == corev1.PodRunning {
			d.web = p.Name
		}
		return d.web != ""
	})
	d.waitFor("kubectl logs and exec working", 2*time.Minute, func() bool { return d.works() == nil })
	working := time.Since(applied)
	approved := d.approvedServingCSRs(t)
	if len(approved) == 0 {
		t.Fatal("logs and exec work, but no kubelet-serving CSR was approved")
	}
	started := time.Now()
	d.proxy = d.node.StartKubeProxy()
	d.waitFor("the NodePort answering on "+uplinkV4, time.Minute, func() bool { return d.nodePortAnswers(uplinkV4) == nil })
	report(t, "apply→logs+exec working %s, %d serving CSR(s) approved, all by nodeaddr (IP SANs %v); kube-proxy start→NodePort on the InternalIP %s",
		working.Round(100*time.Millisecond), len(approved), csrIPs(&approved[0]), time.Since(started).Round(100*time.Millisecond))
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
	d.waitFor("kubectl logs and exec working after the renumbering", 2*time.Minute, func() bool {
		last = d.works()
		return last == nil
	})
	working := time.Since(moved)
	if working > workBound {
		t.Errorf("kubectl logs and exec worked again %s after the renumbering, want within %s", working, workBound)
	}
	times := tr.finish(moved)
	times.working = working
	d.waitFor("the NodePort answering on "+to, time.Minute, func() bool { return d.nodePortAnswers(to) == nil })
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

// nodePortAnswers fetches the NodePort at ip from the router's namespace (an outside client) and
// checks that the web pod answered.
func (d *day) nodePortAnswers(ip string) error {
	c := d.router.HTTPClient()
	c.Timeout = time.Second
	resp, err := c.Get(fmt.Sprintf("http://%s:%d/", ip, d.nodePort))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return nil
}

// approvedServingCSRs returns the approved kubelet-serving CSRs of the node, failing t for any
// approved by someone other than nodeaddr (its condition's reason).
func (d *day) approvedServingCSRs(t *testing.T) []certv1.CertificateSigningRequest {
	list, err := d.c.CP.Admin.CertificatesV1().CertificateSigningRequests().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []certv1.CertificateSigningRequest
	for _, csr := range list.Items {
		if csr.Spec.SignerName != certv1.KubeletServingSignerName || csr.Spec.Username != "system:node:"+d.node.Name {
			continue
		}
		for _, c := range csr.Status.Conditions {
			if c.Type == certv1.CertificateApproved {
				if c.Reason != "NodeaddrApproved" {
					t.Errorf("CSR %s approved with reason %q, not by nodeaddr", csr.Name, c.Reason)
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

// kubeletCertRead: the agent reads the real kubelet's serving certificate on its host (TLSProbe)
// and, after the renumberings, finds it current (covering the addresses it publishes, fresh): the
// state in which its approver makes no request at all (docs/renumbering.md).
func (d *day) kubeletCertRead(t *testing.T) {
	d.t = t
	var last string
	d.waitFor("the agent's log saying the kubelet's serving certificate is current", 3*time.Minute, func() bool {
		p := d.agentPod()
		if p == nil {
			return false
		}
		out, err := d.tryKubectl("-n", "kube-system", "logs", p.Name)
		if err != nil {
			last = err.Error()
			return false
		}
		for _, line := range strings.Split(out, "\n") {
			if strings.Contains(line, `"msg":"kubelet serving certificate"`) {
				last = line
			}
		}
		return strings.Contains(last, `"state":"current"`)
	})
	report(t, "the agent's latest kubelet certificate line: %s", last)
}
