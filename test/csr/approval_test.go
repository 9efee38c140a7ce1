package csr

import (
	"context"
	"strings"
	"testing"
	"time"

	certv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

// The agent with --approve-kubelet-serving-csr approves its own kubelet's legitimate serving CSR,
// leaves every attack of its own kubelet pending with a Warning naming the rule, and does not touch
// another Node's CSR. Its own token cannot approve another Node's CSR, nor deny any.
func TestKubeletServingCSRApproval(t *testing.T) {
	w := newWorld(t, "--approve-kubelet-serving-csr")
	ctx := context.Background()
	// node-b's legitimate CSR first: by the time node-a's is approved, the agent has seen it.
	w.file("node-b-serving", csrSpec{node: other, ips: []string{otherIP}})

	t.Run("own legitimate CSR approved", func(t *testing.T) {
		w.file("legit", csrSpec{})
		ev := w.waitEvent(approvedReason, "legit")
		if ev.Type != corev1.EventTypeNormal || ev.Source.Component != "nodeaddr" {
			t.Errorf("Event %s %+v", ev.Type, ev.Source)
		}
		var approved *certv1.CertificateSigningRequestCondition
		for _, c := range w.csr("legit").Status.Conditions {
			if c.Type == certv1.CertificateApproved {
				approved = &c
			} else {
				t.Errorf("condition %s on the approved CSR", c.Type)
			}
		}
		if approved == nil || approved.Status != corev1.ConditionTrue || approved.Reason != "NodeaddrApproved" ||
			!strings.Contains(approved.Message, "["+selfIP+"]") {
			t.Fatalf("Approved condition %+v", approved)
		}
		if n := w.agent.Metric("nodeaddr_csr_approved_total"); n != 1 {
			t.Errorf("nodeaddr_csr_approved_total = %v, want 1", n)
		}
		if n := w.agent.Metric("nodeaddr_csr_approval_seconds_count"); n != 1 {
			t.Errorf("nodeaddr_csr_approval_seconds_count = %v, want 1", n)
		}
	})

	// The approver's metric families (registered only with the flag) are those of the golden file
	// that test/deploy checks the alert rules and the dashboard against.
	t.Run("approval metrics match the golden file", func(t *testing.T) { checkApprovalGolden(t, w.agent) })

	// The kubelet writes node-b's address into its own Node's status, as NodeRestriction allows (an
	// ExternalIP: nodeaddr manages only InternalIP here, so it stays).
	n := w.cp.Node(t, self)
	n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: otherIP})
	if _, err := w.kubelet(self).CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{FieldManager: "kubelet"}); err != nil {
		t.Fatalf("kubelet writes %s into its Node's status: %v", otherIP, err)
	}
	attacks := []struct {
		name, reason string
		spec         csrSpec
	}{
		{"ip-not-the-nodes", "IPNotPublished", csrSpec{ips: []string{selfIP, "192.0.2.99"}}},
		{"other-nodes-ip-in-own-status", "IPOfAnotherNode", csrSpec{ips: []string{selfIP, otherIP}}},
		{"api-server-ip", "IPOfAPIServer", csrSpec{ips: []string{apiServerIP}}},
		{"foreign-dns-name", "DNSNameNotNode", csrSpec{dns: []string{self, "kubernetes.default.svc"}}},
		{"uri-san", "EmailOrURISAN", csrSpec{uris: []string{"spiffe://cluster.local/ns/kube-system/sa/nodeaddr"}}},
		{"client-auth-usage", "UsagesNotServing", csrSpec{usages: []certv1.KeyUsage{certv1.UsageDigitalSignature, certv1.UsageServerAuth, certv1.UsageClientAuth}}},
	}
	for _, a := range attacks {
		t.Run("attack left pending/"+a.name, func(t *testing.T) {
			w.file(a.name, a.spec)
			ev := w.waitEvent(pendingReason, a.name)
			if ev.Type != corev1.EventTypeWarning || !strings.Contains(ev.Message, "("+a.reason+")") {
				t.Errorf("Event %s %q, want a Warning with (%s)", ev.Type, ev.Message, a.reason)
			}
			if c := w.csr(a.name).Status.Conditions; len(c) != 0 {
				t.Errorf("conditions %+v, want none (pending)", c)
			}
			if n := w.agent.Metric(`nodeaddr_csr_pending_total{reason="` + a.reason + `"}`); n != 1 {
				t.Errorf("nodeaddr_csr_pending_total{reason=%q} = %v, want 1", a.reason, n)
			}
		})
	}

	t.Run("another node's CSR untouched", func(t *testing.T) {
		if c := w.csr("node-b-serving").Status.Conditions; len(c) != 0 {
			t.Errorf("node-b's CSR has conditions %+v", c)
		}
		for _, reason := range []string{pendingReason, approvedReason} {
			for _, e := range w.cp.Events(t, self, reason) {
				if strings.Contains(e.Message, "node-b-serving") {
					t.Errorf("Event about node-b's CSR: %s", e.Message)
				}
			}
		}
	})

	// What the approver cost the API server so far (before this test uses the agent's token itself),
	// besides its LIST and watch of CSRs in each window (its start, each change of the Node's
	// addresses; internal/csrapproval's tests count those exactly): one LIST of
	// Nodes and of the kubernetes EndpointSlices per decision on a CSR of its own Node (the
	// legitimate one and the six attacks), one approval, and nothing for node-b's CSR.
	t.Run("requests", func(t *testing.T) {
		got := approverRequests(t, w, len(attacks)+1)
		want := map[string]int{"update certificatesigningrequests/approval": 1,
			"list nodes (all)": len(attacks) + 1, "list endpointslices": len(attacks) + 1}
		for k, n := range want {
			if got[k] != n {
				t.Errorf("%s: %d requests, want %d (all: %v)", k, got[k], n, got)
			}
		}
		if got["about node-b-serving"] != 0 {
			t.Errorf("%d requests about node-b's CSR", got["about node-b-serving"])
		}
	})

	agent := agentClient(t, w)
	t.Run("agent token cannot approve another node's CSR", func(t *testing.T) {
		err := harness.SetCSRCondition(ctx, agent, w.csr("node-b-serving"), certv1.CertificateApproved)
		expectPolicyDenial(t, err, "may approve only kubernetes.io/kubelet-serving CSRs of system:node:"+self)
	})
	t.Run("agent token cannot deny", func(t *testing.T) {
		for _, name := range []string{"ip-not-the-nodes", "node-b-serving"} {
			err := harness.SetCSRCondition(ctx, agent, w.csr(name), certv1.CertificateDenied)
			expectPolicyDenial(t, err, "")
			if c := w.csr(name).Status.Conditions; len(c) != 0 {
				t.Errorf("%s: conditions %+v after the refused denial", name, c)
			}
		}
	})
	// A CSR filed while the agent was down is decided when it starts, once its resolution is known
	// (the CSR may be examined before that, and is then examined again: internal/agent's csrSink and
	// the Node's events; this run does not tell which of them did it).
	t.Run("restarted agent approves a CSR filed while it was down", func(t *testing.T) {
		if code := w.agent.Stop(); code != 0 {
			t.Fatalf("agent exited %d", code)
		}
		w.file("while-down", csrSpec{})
		w.agent = w.h.Start(w.args...)
		w.waitEvent(approvedReason, "while-down")
	})
	t.Run("agent token cannot delete or create CSRs", func(t *testing.T) {
		err := agent.CertificatesV1().CertificateSigningRequests().Delete(ctx, "ip-not-the-nodes", metav1.DeleteOptions{})
		if !apierrors.IsForbidden(err) {
			t.Errorf("delete: %v, want 403", err)
		}
		_, err = agent.CertificatesV1().CertificateSigningRequests().Create(ctx, csrSpec{}.object(t, "by-agent"), metav1.CreateOptions{})
		if !apierrors.IsForbidden(err) {
			t.Errorf("create: %v, want 403", err)
		}
	})
}

func agentClient(t *testing.T, w *world) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: w.cp.Config.Host, BearerToken: w.cp.AgentToken(t, self),
		TLSClientConfig: rest.TLSClientConfig{Insecure: true}})
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// expectPolicyDenial checks that err is a 403 from nodeaddr's CSR policy (not RBAC's), whose message
// contains want.
func expectPolicyDenial(t *testing.T, err error, want string) {
	t.Helper()
	if err == nil {
		t.Fatal("the write was admitted")
	}
	if msg, ok := harness.DeniedByPolicy(err, policyName); !ok || !strings.Contains(msg, want) {
		t.Fatalf("err %v, want 403 from ValidatingAdmissionPolicy %s saying %q", err, policyName, want)
	}
}

// approverRequests counts the agent's completed requests that serve the approver, by verb and
// resource; "list nodes (all)" are the LISTs without the Node informer's field selector. It waits
// until decisions LISTs of Nodes are logged (the audit log is written as requests complete).
func approverRequests(t *testing.T, w *world, decisions int) map[string]int {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		evs, err := w.cp.Audit(harness.AgentUser)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]int{}
		for _, e := range evs {
			if e.ObjectRef == nil {
				continue
			}
			r := e.ObjectRef.Resource
			if e.ObjectRef.Subresource != "" {
				r += "/" + e.ObjectRef.Subresource
			}
			switch {
			case r == "nodes" && e.Verb == "list" && !strings.Contains(e.RequestURI, "fieldSelector"):
				out["list nodes (all)"]++
			case strings.HasPrefix(r, "certificatesigningrequests") || r == "endpointslices":
				out[e.Verb+" "+r]++
			}
			if e.ObjectRef.Name == "node-b-serving" {
				out["about node-b-serving"]++
			}
		}
		if out["list nodes (all)"] >= decisions || time.Now().After(deadline) {
			return out
		}
	}
}
