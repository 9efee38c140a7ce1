package node

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	certv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

// TestServingCertificate is the serving-certificate part of scenario 5: with serverTLSBootstrap the
// kubelet requests its serving certificate for the Node's addresses; the test approves every
// kubelet-serving CSR (as an operator's approver would) and records which IPs each one asks for,
// before and after nodeaddr publishes addresses and after a renumbering.
func TestServingCertificate(t *testing.T) {
	w := newWorld(t, harness.NodeOptions{ServerTLSBootstrap: true}, nil)
	t.Run("5b-serving-certificate-renumbering", w.servingCertificate)
}

func (w *world) servingCertificate(t *testing.T) {
	w.t = t
	ap := w.approveServingCSRs()
	defer ap.stop()
	w.kubectlAdmin("apply", "-k", w.overlay())
	w.waitAddresses(expectedAddresses(w.node.Name))
	w.waitFor("a serving CSR for "+uplinkV4, 2*time.Minute, func() bool { return ap.has(uplinkV4) })
	const renumbered = "192.0.2.40"
	w.ns.Sysctl("net.ipv4.conf.all.promote_secondaries", "1")
	w.ns.IP("addr", "add", renumbered+"/24", "dev", "eth0")
	w.ns.IP("addr", "del", uplinkV4+"/24", "dev", "eth0")
	w.waitAddresses(withV4(w.node.Name, renumbered))
	moved := time.Now()
	w.waitFor("a serving CSR for "+renumbered, 2*time.Minute, func() bool { return ap.has(renumbered) })
	report(t, "CSRs (IP SANs, in order): %v; new CSR %s after the Node's address moved",
		ap.requested(), time.Since(moved).Round(100*time.Millisecond))
}

// csrApprover approves kubelet-serving CSRs and remembers the IP SANs each asked for.
type csrApprover struct {
	mu     sync.Mutex
	seen   map[string][]string
	order  []string
	cancel context.CancelFunc
	done   chan struct{}
}

func (w *world) approveServingCSRs() *csrApprover {
	ctx, cancel := context.WithCancel(context.Background())
	a := &csrApprover{seen: map[string][]string{}, cancel: cancel, done: make(chan struct{})}
	cs := w.c.CP.Admin.CertificatesV1().CertificateSigningRequests()
	go func() {
		defer close(a.done)
		for ctx.Err() == nil {
			list, err := cs.List(ctx, metav1.ListOptions{})
			if err == nil {
				for _, csr := range list.Items {
					a.handle(ctx, w, &csr)
				}
			}
			time.Sleep(200 * time.Millisecond)
		}
	}()
	return a
}

func (a *csrApprover) handle(ctx context.Context, w *world, csr *certv1.CertificateSigningRequest) {
	if csr.Spec.SignerName != certv1.KubeletServingSignerName {
		return
	}
	a.mu.Lock()
	_, known := a.seen[csr.Name]
	a.mu.Unlock()
	if known {
		return
	}
	var ips []string
	if block, _ := pem.Decode(csr.Spec.Request); block != nil {
		if req, err := x509.ParseCertificateRequest(block.Bytes); err == nil {
			for _, ip := range req.IPAddresses {
				ips = append(ips, ip.String())
			}
		}
	}
	csr.Status.Conditions = append(csr.Status.Conditions, certv1.CertificateSigningRequestCondition{
		Type: certv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: "NodeaddrTest", Message: "approved by the real-node test",
	})
	if _, err := w.c.CP.Admin.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, csr.Name, csr, metav1.UpdateOptions{}); err != nil {
		return
	}
	a.mu.Lock()
	a.seen[csr.Name] = ips
	a.order = append(a.order, csr.Name)
	a.mu.Unlock()
}

// requested lists the approved CSRs' IP SANs in approval order.
func (a *csrApprover) requested() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []string
	for _, n := range a.order {
		out = append(out, fmt.Sprintf("[%s]", strings.Join(a.seen[n], " ")))
	}
	return out
}

func (a *csrApprover) has(ip string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, ips := range a.seen {
		if slices.Contains(ips, ip) {
			return true
		}
	}
	return false
}

func (a *csrApprover) stop() { a.cancel(); <-a.done }
