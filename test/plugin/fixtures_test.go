package plugin

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/cert"

	"github.com/nodeaddr/nodeaddr/internal/vocab"
	"github.com/nodeaddr/nodeaddr/test/harness"
)

// kubelet is a stand-in for a kubelet's serving port on a loopback address: it completes TLS
// handshakes with its current certificate, which the test swaps as a kubelet does once its new
// serving CSR is approved. Nothing else is served.
type kubelet struct {
	ln   net.Listener
	cert atomic.Pointer[tls.Certificate]
}

func startKubelet(t *testing.T, ip string, sans ...string) *kubelet {
	t.Helper()
	k := &kubelet{}
	k.serve(t, sans...)
	ln, err := tls.Listen("tcp", net.JoinHostPort(ip, "0"), &tls.Config{
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return k.cert.Load(), nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	k.ln = ln
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				c.SetDeadline(time.Now().Add(5 * time.Second))
				c.(*tls.Conn).Handshake()
				c.Close()
			}()
		}
	}()
	return k
}

// serve makes the kubelet present a self-signed certificate for sans from now on.
func (k *kubelet) serve(t *testing.T, sans ...string) {
	t.Helper()
	var ips []net.IP
	for _, s := range sans {
		ips = append(ips, net.ParseIP(s))
	}
	certPEM, keyPEM, err := cert.GenerateSelfSignedCertKey("kubelet", ips, nil)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	k.cert.Store(&pair)
}

func (k *kubelet) port() int32 { return int32(k.ln.Addr().(*net.TCPAddr).Port) }

// node creates a Node whose kubelet reports port and, if given, addresses, written by the field
// manager writer (the kubelet, or nodeaddr through a JSON patch as it writes them).
func node(t *testing.T, cp *harness.ControlPlane, name string, port int32, writer string, taints []corev1.Taint, ips ...string) *corev1.Node {
	t.Helper()
	ctx := context.Background()
	// With the hostname label, as a kubelet registers it: the API server records no managedFields
	// for an object created with no field but its name, nor for any later write to it.
	n := cp.CreateNode(t, harness.NodeSpec{Name: name, Taints: taints, Labels: map[string]string{corev1.LabelHostname: name}})
	n.Status.DaemonEndpoints.KubeletEndpoint.Port = port
	var addrs []corev1.NodeAddress
	for _, ip := range ips {
		addrs = append(addrs, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ip})
	}
	if writer == "kubelet" {
		n.Status.Addresses = addrs
	}
	n, err := cp.Admin.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{FieldManager: "kubelet"})
	if err != nil {
		t.Fatal(err)
	}
	if writer == vocab.FieldManager && len(addrs) > 0 {
		patch := `[{"op":"replace","path":"/status/addresses","value":[`
		for i, a := range addrs {
			if i > 0 {
				patch += ","
			}
			patch += `{"type":"InternalIP","address":"` + a.Address + `"}`
		}
		patch += `]}]`
		if n, err = cp.Admin.CoreV1().Nodes().Patch(ctx, name, types.JSONPatchType, []byte(patch),
			metav1.PatchOptions{FieldManager: vocab.FieldManager}, "status"); err != nil {
			t.Fatal(err)
		}
	}
	return n
}

// hostPod creates a running hostNetwork pod on node whose status.podIPs is ip, as its kubelet
// reported it when the pod started.
func hostPod(t *testing.T, cs kubernetes.Interface, ns, name, node, ip string, labels map[string]string, ready bool, restarts int32) {
	t.Helper()
	ctx := context.Background()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec: corev1.PodSpec{NodeName: node, HostNetwork: true, ServiceAccountName: "agent", AutomountServiceAccountToken: new(bool),
			Containers: []corev1.Container{{Name: "nodeaddr", Image: "ghcr.io/nodeaddr/nodeaddr:0.1.0"}}},
	}
	var created *corev1.Pod
	// The ServiceAccount admission plugin sees a new ServiceAccount a moment after it is created.
	harness.Eventually(t, 10*time.Second, 100*time.Millisecond, "create pod "+ns+"/"+name, func() (bool, string) {
		var err error
		created, err = cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
		return err == nil, fmt.Sprint(err)
	})
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	now := metav1.Now()
	created.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}},
		HostIP: ip, HostIPs: []corev1.HostIP{{IP: ip}}, StartTime: &now,
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: status, LastTransitionTime: now}},
		ContainerStatuses: []corev1.ContainerStatus{{Name: "nodeaddr", Image: "ghcr.io/nodeaddr/nodeaddr:0.1.0", Ready: ready,
			RestartCount: restarts, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}}}}
	if _, err := cs.CoreV1().Pods(ns).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("pod %s/%s status: %v", ns, name, err)
	}
}

func namespaces(t *testing.T, cs kubernetes.Interface, names ...string) {
	t.Helper()
	ctx := context.Background()
	for _, ns := range names {
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && ns != "kube-system" && ns != "default" {
			t.Fatal(err)
		}
		if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "agent"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// endpointSlice creates ns/name with one endpoint per pod=address pair.
func endpointSlice(t *testing.T, cs kubernetes.Interface, ns, name string, pods ...[2]string) {
	t.Helper()
	s := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
		Labels: map[string]string{discoveryv1.LabelServiceName: "ingress"}}, AddressType: discoveryv1.AddressTypeIPv4,
		Ports: []discoveryv1.EndpointPort{{Name: new(string), Port: new(int32(443))}}}
	for _, p := range pods {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{p[1]},
			TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: p[0]}})
	}
	if _, err := cs.DiscoveryV1().EndpointSlices(ns).Create(context.Background(), s, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// record writes the approval record of Node name, as its agent does with --approval-record.
func record(t *testing.T, cs kubernetes.Interface, name string, ips ...string) {
	t.Helper()
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, vocab.RecordAnnotation, strings.Join(ips, ","))
	if _, err := cs.CoreV1().Nodes().Patch(context.Background(), name, types.MergePatchType, []byte(patch),
		metav1.PatchOptions{FieldManager: vocab.FieldManager}); err != nil {
		t.Fatal(err)
	}
}

// servingCSR files a kubelet-serving CSR as node's kubelet would (impersonating it: spec.username
// is the requester), for ips.
func servingCSR(t *testing.T, cp *harness.ControlPlane, name, node string, ips ...string) {
	t.Helper()
	csr, err := harness.ServingCSR{Node: node, IPs: ips, DNS: []string{node},
		Usages: []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth}}.Object(name)
	if err != nil {
		t.Fatal(err)
	}
	cfg := rest.CopyConfig(cp.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:node:" + node, Groups: []string{"system:nodes", "system:authenticated"}}
	cs := kubernetes.NewForConfigOrDie(cfg)
	_, err = cs.CertificatesV1().CertificateSigningRequests().Create(context.Background(), csr, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

// warning records a Warning Event about n as nodeaddr's recorder does (source component nodeaddr).
func warning(t *testing.T, cs kubernetes.Interface, n *corev1.Node, reason, message string) {
	t.Helper()
	now := metav1.Now()
	_, err := cs.CoreV1().Events("default").Create(context.Background(), &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Namespace: "default", Name: n.Name + "." + strconv.FormatInt(now.UnixNano(), 16)},
		InvolvedObject: corev1.ObjectReference{Kind: "Node", Name: n.Name, UID: n.UID},
		Type:           corev1.EventTypeWarning, Reason: reason, Message: message,
		Source:         corev1.EventSource{Component: vocab.EventComponent, Host: n.Name},
		FirstTimestamp: now, LastTimestamp: now, Count: 1,
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
}
