package node

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"slices"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

// Scenario 3's uplink: eth0 carries the kubelet's --node-ip (providedIP, 192.0.2.0/24) and a
// second network whose gateway takes the default route, so the route source (routeIP) differs from
// the provided IP and the annotation visibly decides.
const (
	providedIP = uplinkV4
	routeIP    = "198.51.100.10"
	routeGW    = "198.51.100.1"
	// internalTarget is reached through the default route (an address lookup, no packet sent).
	internalTarget = "203.0.113.1"
)

func nodeIPUplink(ns, _ *harness.Netns) {
	ns.IP("addr", "add", providedIP+"/24", "dev", "eth0")
	ns.IP("addr", "add", routeIP+"/24", "dev", "eth0")
	ns.IP("route", "add", "default", "via", routeGW, "dev", "eth0")
	ns.IP("-6", "addr", "add", uplinkV6+"/64", "dev", "eth0", "nodad")
	ns.IP("-6", "route", "add", "default", "via", gatewayV6, "dev", "eth0")
}

// TestKubeletNodeIP is scenario 3: the kubelet runs with --cloud-provider=external and
// --node-ip=providedIP; the agent manages InternalIP toward an IPv4 target (--internal-ip-target,
// as docs/customize.md shows), so the annotation visibly overrides a different route source.
func TestKubeletNodeIP(t *testing.T) {
	w := newWorld(t, worldOptions{node: harness.NodeOptions{KubeletArgs: []string{"--node-ip=" + providedIP}}, uplink: nodeIPUplink})
	t.Run("3-kubelet-node-ip", w.kubeletNodeIP)
}

func (w *world) kubeletNodeIP(t *testing.T) {
	w.t = t
	name := w.node.Name
	n := w.node.Node(w.t)
	if got := n.Annotations["alpha.kubernetes.io/provided-node-ip"]; got != providedIP {
		t.Fatalf("provided-node-ip annotation %q, want %s", got, providedIP)
	}
	seeded := []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: providedIP}, {Type: corev1.NodeHostName, Address: name}}
	if !reflect.DeepEqual(n.Status.Addresses, seeded) {
		t.Fatalf("kubelet registered %v, want %v", n.Status.Addresses, seeded)
	}
	w.kubectlAdmin("apply", "-k", w.overlay("--internal-ip-target="+internalTarget))
	// The route source is routeIP, but the annotation names providedIP, which is on the host.
	honoured := []corev1.NodeAddress{
		{Type: corev1.NodeInternalIP, Address: providedIP},
		{Type: corev1.NodeExternalIP, Address: routeIP},
		{Type: corev1.NodeExternalIP, Address: uplinkV6},
		{Type: corev1.NodeHostName, Address: name},
	}
	harness.Eventually(w.t, 3*time.Minute, 100*time.Millisecond, "the agent pod Ready", func() (bool, string) { p := w.agentPod(); return p != nil && podReady(p), podSeen(p) })
	w.waitAddresses(honoured)
	harness.Eventually(w.t, time.Minute, 100*time.Millisecond, "the taint removed", func() (bool, string) {
		taints := harness.TaintKeys(w.node.Node(w.t))
		return !slices.Contains(taints, uninitialized), fmt.Sprintf("taints %v", taints)
	})

	// The provided IP leaves the host: the addresses follow the host; Event and metric say why.
	w.ns.IP("addr", "del", providedIP+"/24", "dev", "eth0")
	// The IPv4 ExternalIP now equals the InternalIP and is not published (local-ccm's rule).
	followed := []corev1.NodeAddress{
		{Type: corev1.NodeInternalIP, Address: routeIP},
		{Type: corev1.NodeExternalIP, Address: uplinkV6},
		{Type: corev1.NodeHostName, Address: name},
	}
	w.waitAddresses(followed)
	var warning string
	harness.Eventually(w.t, time.Minute, 100*time.Millisecond, "a ProvidedNodeIPNotFound Warning", func() (bool, string) {
		evs := w.c.CP.Events(t, name, "ProvidedNodeIPNotFound")
		if len(evs) > 0 {
			warning = evs[0].Message
		}
		return warning != "", "none"
	})
	var missing float64
	token := w.scraperToken()
	harness.Eventually(w.t, time.Minute, 100*time.Millisecond, "nodeaddr_provided_node_ip_missing 1", func() (bool, string) {
		missing = w.agentMetrics(token)["nodeaddr_provided_node_ip_missing"]
		return missing == 1, fmt.Sprint(missing)
	})
	report(t, "annotation %s honoured over route source %s; after removal InternalIP %s, Warning %q, nodeaddr_provided_node_ip_missing %v",
		providedIP, routeIP, routeIP, warning, missing)
}

// scraperToken is a token for the audience nodeaddr (the shipped --metrics-token-audience) of
// kube-prometheus' Prometheus ServiceAccount, monitoring/prometheus-k8s, which the shipped
// ConfigMap's metrics-allowed-scrapers lists, as Prometheus' projected token is: the agent refuses
// a token for the API server's own audience, such as the admin's, and any other ServiceAccount's.
func (w *world) scraperToken() string {
	w.t.Helper()
	ctx := context.Background()
	admin := w.c.CP.Admin
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "monitoring"}}
	if _, err := admin.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		w.t.Fatal(err)
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "prometheus-k8s", Namespace: "monitoring"}}
	if _, err := admin.CoreV1().ServiceAccounts("monitoring").Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		w.t.Fatal(err)
	}
	tr, err := admin.CoreV1().ServiceAccounts("monitoring").CreateToken(ctx, "prometheus-k8s",
		&authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{Audiences: []string{"nodeaddr"}}}, metav1.CreateOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	return tr.Status.Token
}

// agentMetrics scrapes the agent's /metrics on the node (host network) as the shipped DaemonSet
// serves it: HTTPS with a self-signed certificate, for token (scraperToken).
func (w *world) agentMetrics(token string) map[string]float64 {
	req, _ := http.NewRequestWithContext(context.Background(), "GET", "https://127.0.0.1:9810/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	c := w.ns.HTTPClient()
	c.Transport.(*http.Transport).TLSClientConfig = &tls.Config{InsecureSkipVerify: true}
	resp, err := c.Do(req)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return harness.ParseMetrics(string(body))
}
