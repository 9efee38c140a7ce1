package main

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodeaddr/nodeaddr/internal/inspect"
)

// stale's kubelet serving certificates: where each kubelet serves, and a cache of what it presents.

// kubeletEndpoint is where a Node's kubelet serves: its first InternalIP (else ExternalIP) and the
// port the kubelet reports in status.daemonEndpoints. ok is false when the Node reports neither.
func kubeletEndpoint(n *corev1.Node) (string, bool) {
	port := n.Status.DaemonEndpoints.KubeletEndpoint.Port
	if port == 0 {
		return "", false
	}
	for _, t := range []corev1.NodeAddressType{corev1.NodeInternalIP, corev1.NodeExternalIP} {
		for _, a := range n.Status.Addresses {
			if a.Type == t {
				return net.JoinHostPort(a.Address, strconv.Itoa(int(port))), true
			}
		}
	}
	return "", false
}

// probeCert completes a TLS handshake with endpoint only to read the certificate it presents: it
// sends no credentials and verifies nothing (a stale certificate is what it looks for).
func probeCert(ctx context.Context, endpoint string, timeout time.Duration) inspect.CertProbe {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	d := tls.Dialer{Config: &tls.Config{
		InsecureSkipVerify: true, //nolint:gosec // reads the peer certificate only; nothing is sent after the handshake
		MinVersion:         tls.VersionTLS12,
	}}
	conn, err := d.DialContext(ctx, "tcp", endpoint)
	if err != nil {
		var opErr *net.OpError
		if errors.As(err, &opErr) && opErr.Err != nil {
			err = opErr.Err
		}
		if errors.Is(err, context.DeadlineExceeded) {
			err = errors.New("no answer within " + timeout.String())
		}
		return inspect.CertProbe{Endpoint: endpoint, Err: err}
	}
	defer conn.Close()
	certs := conn.(*tls.Conn).ConnectionState().PeerCertificates
	if len(certs) == 0 {
		return inspect.CertProbe{Endpoint: endpoint, Err: errors.New("no certificate presented")}
	}
	return inspect.CertProbe{Endpoint: endpoint, Cert: certs[0]}
}

// certCache keeps each Node's probe while its kubelet endpoint is unchanged and no CSR changed, so
// that --watch does not shake hands with every kubelet on every pod event. The generation keeps a
// probe that started before an invalidate from being kept after it.
type certCache struct {
	mu         sync.Mutex
	generation int
	probes     map[string]cachedProbe
}

type cachedProbe struct {
	generation int
	probe      inspect.CertProbe
}

// invalidate makes the next get read every certificate again (after a CSR changed).
func (c *certCache) invalidate() {
	c.mu.Lock()
	c.generation++
	c.mu.Unlock()
}

// get returns a probe per Node, reading at once (each within timeout) those not read since their
// endpoint changed or since invalidate.
func (c *certCache) get(ctx context.Context, nodes []corev1.Node, timeout time.Duration) map[string]inspect.CertProbe {
	c.mu.Lock()
	gen := c.generation
	if c.probes == nil {
		c.probes = map[string]cachedProbe{}
	}
	out := map[string]inspect.CertProbe{}
	var wg sync.WaitGroup
	for _, n := range nodes {
		ep, ok := kubeletEndpoint(&n)
		if p, hit := c.probes[n.Name]; ok && hit && p.probe.Endpoint == ep && p.generation == gen {
			out[n.Name] = p.probe
		} else if ok {
			wg.Go(func() {
				p := probeCert(ctx, ep, timeout)
				c.mu.Lock()
				c.probes[n.Name], out[n.Name] = cachedProbe{gen, p}, p
				c.mu.Unlock()
			})
		}
	}
	c.mu.Unlock()
	wg.Wait()
	return out
}
