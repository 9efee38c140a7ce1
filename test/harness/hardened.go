package harness

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// ClusterOptions shape a NodeCluster's control plane.
type ClusterOptions struct {
	// Hardened runs the API server's connections to the kubelet as hardened clusters do (and as
	// docs/security.md recommends): it verifies the kubelet's serving certificate with the CA that
	// kube-controller-manager signs kubelet-serving certificates with (--kubelet-certificate-authority),
	// picks the address in kubeadm's order (--kubelet-preferred-address-types=InternalIP,ExternalIP,
	// Hostname) and authenticates to the kubelet with a client certificate. The kubelet runs with
	// serverTLSBootstrap: true and trusts that CA for clients. kubectl logs and exec then work only
	// once someone approves the kubelet's serving CSR for the Node's current addresses. The API server
	// also accepts client certificates of that CA (ClientFor mints identities).
	Hardened bool
	// DualStack adds an IPv6 family to the cluster's networks, as on a cluster whose nodes may be
	// IPv6-only: the API server serves Services from ServiceCIDR6 besides 10.96.0.0/16 (IPv4 stays
	// the primary family, so the kubernetes Service keeps its IPv4 ClusterIP and
	// ServeKubernetesService its IPv4 endpoint), the node's CNI gives every pod an address from
	// PodCIDR6 too (routing ServiceCIDR6 through PodGateway6), and kube-proxy knows both pod ranges.
	DualStack bool
	// Nodes names more Nodes that may join besides the cluster's Name (StartNode with
	// NodeOptions.Name): each gets its own kubelet token, as system:node:NAME in system:nodes.
	Nodes []string
	// ClusterCIDR, if set, makes kube-controller-manager allocate each Node a /24 pod CIDR from it
	// (its node-ipam controller, as kubeadm sets it up for flannel), and is kube-proxy's
	// --cluster-cidr. Empty: no pod CIDRs; every node's pods come from 10.244.0.0/24 (cniConfig).
	ClusterCIDR string
	// Controllers are more kube-controller-manager controllers to run besides NodeControllers
	// (disruption-controller: PodDisruptionBudgets get their status, as on a real cluster).
	Controllers []string
}

// The IPv6 networks of a DualStack cluster (unique local addresses, inside the node's namespace).
const (
	ServiceCIDR6 = "fd00:10:96::/112"
	PodCIDR6     = "fd00:10:244::/64"
	PodGateway6  = "fd00:10:244::1"
)

// harden adds the hardened flags to the API server (before it starts) and starts the egress proxy
// through which it reaches the kubelet in the node's namespace.
func (c *NodeCluster) harden(signer, signerKey string) {
	t := c.T
	t.Helper()
	ca, err := tls.LoadX509KeyPair(signer, signerKey)
	if err != nil {
		t.Fatal(err)
	}
	c.signer = ca
	certPEM, keyPEM, err := c.issueClientCert("kube-apiserver-kubelet-client", "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	clientCert, clientKey := filepath.Join(c.CP.Dir, "kubelet-client.crt"), filepath.Join(c.CP.Dir, "kubelet-client.key")
	for f, data := range map[string][]byte{clientCert: certPEM, clientKey: keyPEM} {
		if err := os.WriteFile(f, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	c.egress = startEgressProxy(t)
	egressConfig := filepath.Join(c.CP.Dir, "egress-selector.yaml")
	if err := os.WriteFile(egressConfig, []byte(fmt.Sprintf(`apiVersion: apiserver.k8s.io/v1beta1
kind: EgressSelectorConfiguration
egressSelections:
- name: cluster
  connection:
    proxyProtocol: HTTPConnect
    transport: {uds: {udsName: %q}}
`, c.egress.socket)), 0o600); err != nil {
		t.Fatal(err)
	}
	c.CP.ExtraArgs = append(c.CP.ExtraArgs,
		"--kubelet-certificate-authority="+signer,
		"--kubelet-preferred-address-types=InternalIP,ExternalIP,Hostname",
		"--kubelet-client-certificate="+clientCert, "--kubelet-client-key="+clientKey,
		"--client-ca-file="+signer,
		"--egress-selector-config-file="+egressConfig)
}

// issueClientCert signs a client certificate for user in groups with the cluster's signer.
func (c *NodeCluster) issueClientCert(user string, groups ...string) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	parent, err := x509.ParseCertificate(c.signer.Certificate[0])
	if err != nil {
		return nil, nil, err
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: user, Organization: groups},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, c.signer.PrivateKey)
	if err != nil {
		return nil, nil, err
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), nil
}

// ClientFor returns a client authenticated as user in groups by a client certificate of the
// cluster's CA, as a kubelet's is (a hardened cluster only): a test mints a node's identity.
func (c *NodeCluster) ClientFor(user string, groups ...string) kubernetes.Interface {
	t := c.T
	t.Helper()
	if !c.Options.Hardened {
		t.Fatal("ClientFor needs a hardened cluster (the API server trusts the signer's client certificates)")
	}
	certPEM, keyPEM, err := c.issueClientCert(user, groups...)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: c.CP.Config.Host,
		TLSClientConfig: rest.TLSClientConfig{CAFile: c.CP.CAFile, CertData: certPEM, KeyData: keyPEM}})
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// egressProxy is the API server's way into the node's network namespace, as Konnectivity is in
// clusters whose API server cannot route to the nodes: an HTTP CONNECT proxy on a unix socket (not
// bound to a network namespace) that the API server's egress selector names for "cluster" traffic,
// its connections to kubelets. It dials each target from inside the node's namespace, so TLS stays
// end to end between the API server and the kubelet, and nothing leaves the test's namespaces.
type egressProxy struct {
	socket string
	l      net.Listener
	mu     sync.Mutex
	ns     *Netns
	conns  map[net.Conn]bool
	wg     sync.WaitGroup
}

func startEgressProxy(t interface {
	Fatal(...any)
	Cleanup(func())
}) *egressProxy {
	// Short: unix socket paths are limited to 107 bytes.
	socket := filepath.Join(os.TempDir(), "na-egress-"+randomToken()[:8]+".sock")
	l, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	p := &egressProxy{socket: socket, l: l, conns: map[net.Conn]bool{}}
	t.Cleanup(p.close)
	p.wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			p.wg.Go(func() { p.serve(c) })
		}
	})
	return p
}

// setNode makes the proxy dial inside ns (the node's namespace, once it exists).
func (p *egressProxy) setNode(ns *Netns) {
	p.mu.Lock()
	p.ns = ns
	p.mu.Unlock()
}

func (p *egressProxy) track(c net.Conn, add bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if add {
		p.conns[c] = true
	} else {
		delete(p.conns, c)
	}
}

func (p *egressProxy) serve(c net.Conn) {
	p.track(c, true)
	defer func() { c.Close(); p.track(c, false) }()
	req, err := http.ReadRequest(bufio.NewReader(c))
	if err != nil || req.Method != http.MethodConnect {
		fmt.Fprint(c, "HTTP/1.1 400 Bad Request\r\n\r\n")
		return
	}
	p.mu.Lock()
	ns := p.ns
	p.mu.Unlock()
	if ns == nil {
		fmt.Fprint(c, "HTTP/1.1 503 Service Unavailable\r\n\r\n")
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	up, err := ns.Dial(ctx, req.URL.Host)
	cancel()
	if err != nil {
		fmt.Fprint(c, "HTTP/1.1 502 Bad Gateway\r\n\r\n")
		return
	}
	p.track(up, true)
	defer func() { up.Close(); p.track(up, false) }()
	fmt.Fprint(c, "HTTP/1.1 200 Connection established\r\n\r\n")
	var pw sync.WaitGroup
	pw.Go(func() { io.Copy(up, c); up.(*net.TCPConn).CloseWrite() })
	pw.Go(func() { io.Copy(c, up); c.Close() })
	pw.Wait()
}

func (p *egressProxy) close() {
	p.l.Close()
	p.mu.Lock()
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
	os.Remove(p.socket)
}
