package csrapproval

// What the kubelet's serving certificate says about the CSRs to come. Between address changes a
// kubelet files a serving CSR only when its certificate must be renewed: it does not cover the
// Node's addresses, or it nears the end of its life (client-go's certificate manager rotates at a
// random point between 70% and 90% of it). The approver reads that certificate from the kubelet of
// its own host with a TLS handshake (no request to the API server) and LISTs CSRs only while one of
// these holds, or while it cannot read the certificate at all. A kubelet serving a current
// certificate costs the API server nothing.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// CertState is what the kubelet's serving certificate says about the CSRs to come.
type CertState string

// The states of the kubelet's serving certificate.
const (
	// CertCurrent: it covers every address nodeaddr publishes and is before the rotation span; no
	// CSR is expected and the approver makes no request.
	CertCurrent CertState = "current"
	// CertUncovered: an address nodeaddr publishes is not among its IP SANs; the kubelet files (or
	// filed) a CSR for the Node's new addresses.
	CertUncovered CertState = "uncovered"
	// CertRotating: it is past 70% of its lifetime (or expired); the kubelet files a rotation CSR at a
	// random point before 90%.
	CertRotating CertState = "rotating"
	// CertUnknown: no certificate was read (the kubelet is not serving TLS yet, is not reachable on
	// this host, or no probe is configured); the approver LISTs at the backstop interval, as without
	// the probe.
	CertUnknown CertState = "unknown"
)

// rotationStart is the part of a certificate's lifetime after which client-go's certificate manager
// may rotate it (its deadline is drawn between 70% and 90%).
const rotationStart = 0.7

// JudgeCert says what the kubelet's serving certificate cert (nil: not read) means at now, given
// the addresses nodeaddr publishes for the Node.
func JudgeCert(cert *x509.Certificate, published []netip.Addr, now time.Time) CertState {
	if cert == nil {
		return CertUnknown
	}
	for _, p := range published {
		if !certHasIP(cert, p) {
			return CertUncovered
		}
	}
	life := cert.NotAfter.Sub(cert.NotBefore)
	if life <= 0 || !now.Before(cert.NotBefore.Add(time.Duration(float64(life)*rotationStart))) {
		return CertRotating
	}
	return CertCurrent
}

// ExpectsCSR reports whether a kubelet-serving CSR may be filed without an address change, so
// that the backstop LIST is needed.
func (s CertState) ExpectsCSR() bool { return s != CertCurrent }

func certHasIP(cert *x509.Certificate, want netip.Addr) bool {
	for _, ip := range cert.IPAddresses {
		if a, ok := netip.AddrFromSlice(ip); ok && a.Unmap() == want.Unmap() {
			return true
		}
	}
	return false
}

// KubeletCert reads the serving certificate the kubelet of this host presents; node (nil until
// known) and the published addresses say where it listens.
type KubeletCert func(ctx context.Context, node *corev1.Node, published []netip.Addr) (*x509.Certificate, error)

// DefaultKubeletPort is the kubelet's port when the Node does not say it
// (status.daemonEndpoints.kubeletEndpoint).
const DefaultKubeletPort = 10250

// probeTimeout bounds one handshake: the kubelet is on this host.
const probeTimeout = 2 * time.Second

// TLSProbe is the KubeletCert of an agent on the host network: a TLS handshake with the kubelet's
// port on loopback, then on each published address (a kubelet bound to one address), and the leaf
// certificate the kubelet presented. Nothing is sent after the handshake, and the certificate is
// not verified: it only decides whether to LIST CSRs, never what to approve, so a forged one can at
// worst cost LISTs or delay a rotation's approval to the next agent start.
func TLSProbe(ctx context.Context, node *corev1.Node, published []netip.Addr) (*x509.Certificate, error) {
	port := kubeletPort(node)
	hosts := []string{"127.0.0.1", "::1"}
	for _, p := range published {
		hosts = append(hosts, p.Unmap().String())
	}
	var errs []error
	for _, h := range hosts {
		cert, err := handshake(ctx, net.JoinHostPort(h, strconv.Itoa(port)))
		if err == nil {
			return cert, nil
		}
		errs = append(errs, err)
	}
	return nil, fmt.Errorf("kubelet serving certificate not read: %w", errors.Join(errs...))
}

// kubeletPort is the kubelet's port as its Node says (status.daemonEndpoints), or the default.
func kubeletPort(node *corev1.Node) int {
	if node != nil && node.Status.DaemonEndpoints.KubeletEndpoint.Port > 0 {
		return int(node.Status.DaemonEndpoints.KubeletEndpoint.Port)
	}
	return DefaultKubeletPort
}

func handshake(ctx context.Context, addr string) (*x509.Certificate, error) {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	d := tls.Dialer{Config: &tls.Config{
		MinVersion: tls.VersionTLS12,
		// Read, never trusted: see TLSProbe.
		InsecureSkipVerify: true, //nolint:gosec // the certificate decides only whether to LIST CSRs
	}}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	certs := conn.(*tls.Conn).ConnectionState().PeerCertificates
	if len(certs) == 0 {
		return nil, fmt.Errorf("%s presented no certificate", addr)
	}
	return certs[0], nil
}

// CertObserver is implemented by an Observer that also shows the kubelet's serving certificate.
type CertObserver interface {
	// OnKubeletCert is called after each probe: the state, and the certificate's end (zero when
	// none was read).
	OnKubeletCert(state CertState, notAfter time.Time)
}

// probeLoop reads the kubelet's serving certificate at once, then every probe interval.
func (a *Approver) probeLoop(ctx context.Context) {
	t := time.NewTicker(a.cfg.ProbeInterval)
	defer t.Stop()
	for {
		a.probe(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// probe reads the certificate and records its state. An uncovered certificate counts only once
// two probes in a row saw it (same certificate, same addresses): right after an address change the
// window is watching and the kubelet renews within seconds. Then, if no window is open, it opens
// one with a LIST, once per certificate and addresses: the kubelet may have filed its CSR while no
// window was open (it was down when the addresses changed, or retried later).
func (a *Approver) probe(ctx context.Context) {
	published, node := a.cfg.Own()
	cert, err := a.cfg.Kubelet(ctx, node, published)
	if ctx.Err() != nil {
		return
	}
	now := a.cfg.Now()
	state := JudgeCert(cert, published, now)
	var notAfter time.Time
	key := ""
	if cert != nil {
		notAfter = cert.NotAfter
		key = fmt.Sprint(cert.SerialNumber, published)
	}
	a.mu.Lock()
	prev := a.cert
	confirmed := state != CertUncovered || (a.seen == CertUncovered && a.seenKey == key)
	a.seen, a.seenKey = state, key
	if confirmed {
		a.cert = state
	}
	open := confirmed && state == CertUncovered && key != a.uncovered && !now.Before(a.win.until)
	if open {
		a.uncovered = key
	}
	current := a.cert
	a.mu.Unlock()
	if o, ok := a.cfg.Observer.(CertObserver); ok {
		o.OnKubeletCert(current, notAfter)
	}
	if current != prev {
		a.cfg.Logger.Info("kubelet serving certificate", "node", a.cfg.Node, "state", current,
			"not_after", notAfter, "backstop_list", current.ExpectsCSR(), "err", err)
	}
	if open {
		a.Open("kubelet-certificate-uncovered")
	}
}

// expectsCSR reports whether the backstop LIST is needed now.
func (a *Approver) expectsCSR() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.cert.ExpectsCSR()
}
