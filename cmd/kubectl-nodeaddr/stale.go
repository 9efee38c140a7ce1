package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"

	"github.com/nodeaddr/nodeaddr/internal/csrapproval/rules"
	"github.com/nodeaddr/nodeaddr/internal/inspect"
)

const staleExample = `  # Everything that still names an address a Node no longer has; exit 1 if anything does
  kubectl nodeaddr stale

  # Only what concerns node-a, as JSON
  kubectl nodeaddr stale node-a -o json

  # The fix commands alone, each once
  kubectl nodeaddr stale -o jsonpath='{range .items[?(@.state=="stale")]}{.fix}{"\n"}{end}' | sort -u

  # In a script: wait until nothing is stale, and stop at once when the plugin cannot tell (exit 2, 3)
  until kubectl nodeaddr stale >/dev/null; do rc=$?; [ $rc -eq 1 ] || exit $rc; sleep 10; done

  # Follow changes until interrupted
  kubectl nodeaddr stale --watch`

// staleOptions are stale's own flags.
type staleOptions struct {
	*options
	out          *outputFlags
	watch        bool
	pendingAfter time.Duration
	timeout      time.Duration
	probe        bool
	certs        certCache
}

func newStale(o *options) *cobra.Command {
	s := &staleOptions{options: o}
	cmd := &cobra.Command{
		Use:   "stale [NODE...]",
		Short: "List what still names an address a Node no longer has, and the command that fixes it",
		Long: `List everything that still names an address of a Node's past, that is an address the Node no
longer has in status.addresses, one line each, ending with the command that fixes it:

 - hostNetwork pods whose status.podIPs is not one of their Node's addresses (a hostNetwork pod keeps
   the address its Node had when it started), each with the remediator's verdict (nodeaddr
   remediator, deploy/components/pod-remediation): when it evicts the pod, or why not (static pod,
   no controller, opted out, a PodDisruptionBudget, no remediator installed);
 - EndpointSlice endpoints that carry such a pod's old address;
 - the kubelet serving certificate each Node presents on its kubelet port (status.daemonEndpoints, at
   its InternalIP) when its IP SANs lack one of the Node's addresses. It is read with a TLS handshake
   that sends no credentials; a port this machine cannot reach is shown as unknown, which is not
   stale;
 - kubelet-serving CSRs pending for longer than --pending-after. The fix is the central approver's
   verdict (nodeaddr approver, with its default flags) on the facts it reads, which stale reads with
   your credentials: approve what it approves, deny what it refuses (the reason is shown), and no
   advice when a fact cannot be read (get services, list servicecidrs).

-o json, yaml, jsonpath, go-template and custom-columns print the list {"kind": "StaleList",
"items": [...]} (each item: kind, namespace, name, node, where, address, state, fix, and remediation for a pod); -o name prints
the objects listed (pod/NAME, endpointslice.discovery.k8s.io/NAME, node/NAME,
certificatesigningrequest.certificates.k8s.io/NAME), each once.

A kubelet port shown as unknown is not stale and does not change the exit status. --watch ends at
once with 3 when it cannot read the cluster at the start, and on Ctrl-C with the last list's status.

` + exitStatusHelp,
		Example: staleExample,
		PreRunE: func(cmd *cobra.Command, _ []string) error {
			if s.pendingAfter < 0 || s.timeout <= 0 {
				return usageError{fmt.Errorf("--pending-after must not be negative and --kubelet-timeout must be positive"), cmd}
			}
			return s.out.complete(cmd)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			cs, _, err := o.clients()
			if err != nil {
				return err
			}
			if s.watch {
				return s.watchStale(cmd.Context(), cs, args)
			}
			snap, err := s.gather(cmd.Context(), cs, args)
			if err != nil {
				return err
			}
			found := s.evaluate(cmd.Context(), cs, snap, ptrs(snap.Nodes), len(args) == 0)
			if err := s.print(o.stdout, found); err != nil {
				return err
			}
			return staleExit(found)
		},
	}
	f := cmd.Flags()
	f.BoolVarP(&s.watch, "watch", "w", false, "After listing, re-evaluate on every change (watches, no polling) until interrupted.")
	f.DurationVar(&s.pendingAfter, "pending-after", 5*time.Minute, "List a kubelet-serving CSR once it has been pending for longer than this.")
	f.DurationVar(&s.timeout, "kubelet-timeout", 3*time.Second, "How long to wait for each kubelet's TLS handshake before showing its certificate as unknown.")
	f.BoolVar(&s.probe, "kubelet-certs", true, "Read each kubelet's serving certificate (false: skip the TLS handshakes).")
	s.out = addOutputFlags(cmd, &o.noHeaders)
	return cmd
}

// staleExit is stale's contract with scripts: exit 1 when something is stale, else 0.
func staleExit(found []inspect.Finding) error {
	if inspect.CountStale(found) > 0 {
		return exitCode(exitStale)
	}
	return nil
}

// gather lists the Nodes (the named ones, else all), their pods, the EndpointSlices and CSRs.
func (s *staleOptions) gather(ctx context.Context, cs kubernetes.Interface, names []string) (inspect.Snapshot, error) {
	snap := inspect.Snapshot{AllNodes: len(names) == 0, Now: time.Now(), PendingAfter: s.pendingAfter}
	var err error
	if snap.Nodes, err = getNodes(ctx, cs, names); err != nil {
		return snap, err
	}
	// With named Nodes, list only their pods (a field selector per Node), not the cluster's.
	selectors := []string{""}
	for i, n := range names {
		selectors = append(selectors[:i], fields.OneTermEqualSelector("spec.nodeName", n).String())
	}
	for _, sel := range selectors {
		pods, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: sel})
		if err != nil {
			return snap, fmt.Errorf("list pods: %w", err)
		}
		snap.Pods = append(snap.Pods, pods.Items...)
	}
	eps, err := cs.DiscoveryV1().EndpointSlices("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return snap, fmt.Errorf("list endpointslices: %w", err)
	}
	snap.Slices = eps.Items
	csrs, err := cs.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{FieldSelector: rules.SignerFieldSelector})
	if err != nil {
		return snap, fmt.Errorf("list certificatesigningrequests: %w", err)
	}
	snap.CSRs = csrs.Items
	return snap, nil
}

// evaluate applies the rules to snap, with the approver's facts while a CSR is pending (nodes: every
// Node when all, else those checked) and the kubelet serving certificates.
func (s *staleOptions) evaluate(ctx context.Context, cs kubernetes.Interface, snap inspect.Snapshot,
	nodes []*corev1.Node, all bool) []inspect.Finding {
	pending := func(c certificatesv1.CertificateSigningRequest) bool { return rules.Pending(&c) }
	if slices.ContainsFunc(snap.CSRs, pending) {
		approvalFacts(ctx, cs, &snap, nodes, all)
	}
	if s.probe {
		snap.Certs = s.certs.get(ctx, snap.Nodes, s.timeout)
	}
	remediationFacts(ctx, cs, &snap)
	return inspect.Stale(snap)
}

// approvalFacts reads what the CSR approver decides from, and its flags from its Deployment, into
// snap; ApprovalUnknown names what could not be read (then no approval is advised). What the API
// server does not serve (ServiceCIDRs before 1.33) is none.
func approvalFacts(ctx context.Context, cs kubernetes.Interface, snap *inspect.Snapshot, nodes []*corev1.Node, all bool) {
	var missing []string
	c := &snap.Approval
	read := func(what string, err error) bool {
		if err != nil && !apierrors.IsNotFound(err) {
			missing = append(missing, fmt.Sprintf("%s: %v", what, err))
		}
		return err == nil
	}
	if !all {
		if l, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); read("list nodes", err) {
			nodes = ptrs(l.Items)
		}
	}
	c.Nodes = rules.NodeIndex(nodes)
	svc, err := cs.CoreV1().Services(rules.APIServerNamespace).Get(ctx, rules.APIServerService, metav1.GetOptions{})
	if read("get service", err) {
		c.Services = []*corev1.Service{svc}
	}
	eps, err := cs.DiscoveryV1().EndpointSlices(rules.APIServerNamespace).List(ctx, metav1.ListOptions{LabelSelector: rules.APIServerSliceSelector})
	if read("list endpointslices", err) {
		c.EndpointSlices = ptrs(eps.Items)
	}
	cidrs, err := cs.NetworkingV1().ServiceCIDRs().List(ctx, metav1.ListOptions{})
	if read("list servicecidrs", err) {
		c.ServiceCIDRs = ptrs(cidrs.Items)
	}
	deps, err := cs.AppsV1().Deployments("").List(ctx, metav1.ListOptions{LabelSelector: approverSelector})
	if read("list deployments", err) {
		if err := approverFlags(snap, deps.Items); err != nil {
			missing = append(missing, err.Error())
		}
	}
	snap.ApprovalUnknown = strings.Join(missing, "; ")
}

// approverSelector selects the approver's Deployment (deploy/components/kubelet-serving-csr).
const approverSelector = "app.kubernetes.io/name=nodeaddr-approver"

// approverFlags reads the policy flags of the approver's container (its args start with approver)
// into snap; none installed leaves the defaults, two that disagree are an error.
func approverFlags(snap *inspect.Snapshot, deps []appsv1.Deployment) error {
	snap.Policy, snap.ServiceCIDRs = rules.Policy{}, nil
	var seen []string
	for _, d := range deps {
		for _, ctr := range d.Spec.Template.Spec.Containers {
			args := slices.Concat(ctr.Command, ctr.Args)
			i := slices.Index(args, "approver")
			if i < 0 {
				continue
			}
			p, cidrs, err := rules.ApproverPolicy(args[i+1:])
			if err != nil {
				return fmt.Errorf("the flags of deployment %s/%s: %w", d.Namespace, d.Name, err)
			}
			if seen = append(seen, d.Namespace+"/"+d.Name); len(seen) > 1 &&
				(!reflect.DeepEqual(p, snap.Policy) || !slices.Equal(cidrs, snap.ServiceCIDRs)) {
				return fmt.Errorf("approver deployments %s have different flags", strings.Join(seen, ", "))
			}
			snap.Policy, snap.ServiceCIDRs = p, cidrs
		}
	}
	return nil
}

func ptrs[T any](s []T) []*T {
	out := make([]*T, len(s))
	for i := range s {
		out[i] = &s[i]
	}
	return out
}

// print writes the findings as stale's table or with the printer of -o.
func (s *staleOptions) print(w io.Writer, found []inspect.Finding) error {
	if !s.out.table() {
		return printList(s.out, w, "StaleList", found)
	}
	if len(found) == 0 {
		fmt.Fprintln(s.stderr, "Nothing names an old address.")
		return nil
	}
	table := [][]string{{"NODE", "NAMESPACE", "OBJECT", "WHERE", "ADDRESS", "FIX"}}
	for _, f := range found {
		ns := cmp.Or(f.Namespace, "-")
		table = append(table, []string{f.Node, ns, f.Kind + "/" + f.Name, f.Where, f.Address, f.Fix})
	}
	return printTable(w, table, s.noHeaders)
}
