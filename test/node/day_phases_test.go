package node

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	certv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// phases are the steps between a renumbering and kubectl logs working again, in order.
var phases = []string{"Node", "CSR filed", "approved", "issued", "kubelet serving"}

// phaseTracker records when each phase was first seen for the new address ip, polling every
// 100 ms: the Node lists ip, the kubelet filed a serving CSR with ip, it is approved, it has a
// certificate, and the kubelet presents a certificate for ip on its port.
type phaseTracker struct {
	d    *day
	ip   string
	stop chan struct{}
	done chan struct{}
	mu   sync.Mutex
	at   map[string]time.Time
	sans []string
}

func (d *day) trackPhases(ip string) *phaseTracker {
	tr := &phaseTracker{d: d, ip: ip, stop: make(chan struct{}), done: make(chan struct{}), at: map[string]time.Time{}}
	go func() {
		defer close(tr.done)
		for {
			tr.poll()
			select {
			case <-tr.stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	return tr
}

func (tr *phaseTracker) seen(phase string) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if _, ok := tr.at[phase]; !ok {
		tr.at[phase] = time.Now()
	}
}

func (tr *phaseTracker) poll() {
	ctx := context.Background()
	admin := tr.d.c.CP.Admin
	if n, err := admin.CoreV1().Nodes().Get(ctx, tr.d.node.Name, metav1.GetOptions{}); err == nil && hasAddress(n.Status.Addresses, tr.ip) {
		tr.seen("Node")
	}
	if list, err := admin.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{}); err == nil {
		for _, csr := range list.Items {
			if csr.Spec.SignerName != certv1.KubeletServingSignerName || !slices.Contains(csrIPs(&csr), tr.ip) {
				continue
			}
			tr.seen("CSR filed")
			tr.mu.Lock()
			tr.sans = csrIPs(&csr)
			tr.mu.Unlock()
			for _, c := range csr.Status.Conditions {
				if c.Type == certv1.CertificateApproved {
					tr.seen("approved")
				}
			}
			if len(csr.Status.Certificate) > 0 {
				tr.seen("issued")
			}
		}
	}
	// Probed only once issued (the kubelet cannot serve it before): until the address is the
	// node's, a dial to it waits for a neighbour that never answers.
	if tr.has("issued") && slices.Contains(tr.d.servingIPs(tr.ip), tr.ip) {
		tr.seen("kubelet serving")
	}
}

func (tr *phaseTracker) has(phase string) bool {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	_, ok := tr.at[phase]
	return ok
}

// dayTimes are one renumbering's times from the kernel change: each phase's (absent if not seen),
// kubectl logs and exec working, kube-proxy's exit (NodeIPs changed), the NodePort answering on the
// new address (checked once logs and exec work: an upper bound); and the IP SANs of the kubelet's
// new CSR.
type dayTimes struct {
	phase                        map[string]time.Duration
	working, proxyExit, nodePort time.Duration
	sans                         []string
}

// finish stops the tracker and returns when each phase was seen, after moved.
func (tr *phaseTracker) finish(moved time.Time) dayTimes {
	close(tr.stop)
	<-tr.done
	tr.mu.Lock()
	defer tr.mu.Unlock()
	out := dayTimes{phase: map[string]time.Duration{}, sans: tr.sans}
	for p, at := range tr.at {
		out.phase[p] = at.Sub(moved)
	}
	return out
}

// String lists the phases in order.
func (dt dayTimes) String() string {
	var out []string
	for _, p := range phases {
		if d, ok := dt.phase[p]; ok {
			out = append(out, fmt.Sprintf("→%s %s", p, d.Round(10*time.Millisecond)))
		} else {
			out = append(out, "→"+p+" not seen")
		}
	}
	return strings.Join(out, ", ")
}

// servingIPs returns the IP SANs of the certificate the kubelet presents at ip:10250 (dialled from
// the node's namespace), or nil.
func (d *day) servingIPs(ip string) []string {
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	c, err := d.ns.Dial(ctx, net.JoinHostPort(ip, "10250"))
	if err != nil {
		return nil
	}
	defer c.Close()
	tc := tls.Client(c, &tls.Config{InsecureSkipVerify: true}) // only the presented certificate is read
	tc.SetDeadline(time.Now().Add(time.Second))
	if tc.Handshake() != nil {
		return nil
	}
	var out []string
	for _, a := range tc.ConnectionState().PeerCertificates[0].IPAddresses {
		out = append(out, a.String())
	}
	return out
}

// csrIPs returns the IP SANs a CSR asks for.
func csrIPs(csr *certv1.CertificateSigningRequest) []string {
	var ips []string
	if block, _ := pem.Decode(csr.Spec.Request); block != nil {
		if req, err := x509.ParseCertificateRequest(block.Bytes); err == nil {
			for _, ip := range req.IPAddresses {
				ips = append(ips, ip.String())
			}
		}
	}
	return ips
}
