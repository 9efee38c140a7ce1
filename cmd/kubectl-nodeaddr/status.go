package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"

	"github.com/nodeaddr/nodeaddr/internal/inspect"
	"github.com/nodeaddr/nodeaddr/internal/vocab"
)

const statusExample = `  # Every Node: addresses, who wrote them, when nodeaddr last did, taint, agent, last Warning
  kubectl nodeaddr status

  # Two Nodes, with every address, field manager, the agent pod and the Warning's message
  kubectl nodeaddr status node-a node-b -o wide

  # As JSON, for a script
  kubectl nodeaddr status -o json

  # The Nodes that need attention (a line starting with ! in the table)
  kubectl nodeaddr status -o go-template='{{range .items}}{{if .attention}}{{.node}}{{"\n"}}{{end}}{{end}}'

  # Columns of your choice
  kubectl nodeaddr status -o custom-columns=NODE:.node,INTERNAL:.internalIPs[*],AGENT:.agent.version`

func newStatus(o *options) *cobra.Command {
	var out *outputFlags
	cmd := &cobra.Command{
		Use:   "status [NODE...]",
		Short: "Show each Node's addresses, their writers, the agent pod and nodeaddr's last Warning",
		Long: `Show one line per Node: its InternalIPs and ExternalIPs, the field managers that wrote
status.addresses (nodeaddr, kubelet, ccm for a cloud-controller-manager, other), how long ago nodeaddr
last wrote them, whether the node.cloudprovider.kubernetes.io/uninitialized taint is still there, the
version of the nodeaddr agent pod on the Node (NotReady, or <none>) and the reason of the last Warning
Event nodeaddr emitted about the Node.

A line starting with ! needs attention: the Node has no agent pod, its agent is not ready, or it is
still tainted with no address. -o wide adds every address, the field managers' names, the time of the
write, the agent pod's name, readiness, restarts and the Warning's message.

-o json, yaml, jsonpath, go-template and custom-columns print the list {"kind": "NodeStatusList",
"items": [...]}, one item per Node (node, internalIPs, externalIPs, writers, lastWrite,
uninitialized, agent, lastWarning, attention); -o name prints node/NAME for each.

` + exitStatusHelp,
		Example: statusExample,
		PreRunE: func(cmd *cobra.Command, _ []string) error { return out.complete(cmd) },
		RunE: func(cmd *cobra.Command, args []string) error {
			cs, ns, err := o.clients()
			if err != nil {
				return err
			}
			rows, err := statusRows(cmd.Context(), cs, ns, o.selector, args)
			if err != nil {
				return err
			}
			if !out.table() {
				return printList(out, o.stdout, "NodeStatusList", rows)
			}
			if len(rows) == 0 {
				fmt.Fprintln(o.stderr, "No resources found")
				return nil
			}
			return printTable(o.stdout, inspect.StatusTable(rows, time.Now(), out.wide()), o.noHeaders)
		},
	}
	out = addOutputFlags(cmd, &o.noHeaders)
	return cmd
}

// statusRows builds the row of each Node (the named ones, else all).
func statusRows(ctx context.Context, cs kubernetes.Interface, ns, selector string, names []string) ([]inspect.NodeStatus, error) {
	nodes, err := getNodes(ctx, cs, names)
	if err != nil {
		return nil, err
	}
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, fmt.Errorf("list agent pods: %w", err)
	}
	// Events about a cluster-scoped Node are recorded in the default namespace, but a recorder may
	// choose another: search them all.
	events, err := cs.CoreV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.kind=Node,type=Warning"})
	if err != nil {
		return nil, fmt.Errorf("list events: %w", err)
	}
	rows := make([]inspect.NodeStatus, 0, len(nodes))
	for i := range nodes {
		rows = append(rows, inspect.Status(&nodes[i], pods.Items, events.Items))
	}
	return rows, nil
}

// getNodes gets the named Nodes in the order given, or lists every Node sorted by name.
func getNodes(ctx context.Context, cs kubernetes.Interface, names []string) ([]corev1.Node, error) {
	if len(names) == 0 {
		l, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		slices.SortFunc(l.Items, func(a, b corev1.Node) int { return strings.Compare(a.Name, b.Name) })
		return l.Items, nil
	}
	nodes := make([]corev1.Node, 0, len(names))
	for _, name := range names {
		n, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		nodes = append(nodes, *n)
	}
	return nodes, nil
}

const explainExample = `  # Why node-a has its addresses: every candidate and the rule that chose or dropped it
  kubectl nodeaddr explain node-a

  # As JSON
  kubectl nodeaddr explain node-a -o json

  # Only the addresses chosen
  kubectl nodeaddr explain node-a -o jsonpath='{range .lines[?(@.chosen==true)]}{.type} {.address}{"\n"}{end}'`

func newExplain(o *options) *cobra.Command {
	var out *outputFlags
	cmd := &cobra.Command{
		Use:   "explain NODE",
		Short: "Show why a Node has its addresses, as its agent explained them at the last change",
		Long: `Show, for each address type and family, every candidate address and the rule that chose or
dropped it (route source, interface rule, CIDR priority or ! rule, default exclusion, VIP, secondary,
pod or service CIDR, equal to an InternalIP, held during removal grace, STUN), as
'nodeaddr --dry-run --explain' prints it.

The agent records this explanation in the AddressesUpdated Event about the Node each time it writes
the Node's addresses; the command reads the newest such Event (core/v1 Events about the Node from
component nodeaddr, with your credentials). The message is bounded: the chosen lines first, then
the others as room allows, "(N more lines: --explain)" counting those left out.

Events expire after the API server's --event-ttl (1h by default). Without an Event, the command
falls back to the newest explanation in the log of the agent pod on the Node (pods/log), which is
gone once the log rotated; a restart of the agent pod explains its addresses again at once.

-o json, yaml, jsonpath, go-template and custom-columns print the object {"kind": "Explanation",
"node", "event" or "pod", "time", "state", "change", "lines": [...], "more"} (each line: type,
family, address, from, chosen, reason); -o name prints node/NAME.

` + exitStatusHelp,
		Example: explainExample,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageError{fmt.Errorf("explain takes one Node name, got %d arguments", len(args)), cmd}
			}
			return nil
		},
		PreRunE: func(cmd *cobra.Command, _ []string) error { return out.complete(cmd) },
		RunE: func(cmd *cobra.Command, args []string) error {
			cs, ns, err := o.clients()
			if err != nil {
				return err
			}
			e, err := lastExplanation(cmd.Context(), cs, ns, o.selector, args[0])
			if err != nil {
				return err
			}
			if !out.table() {
				obj := &explanationObject{metav1.TypeMeta{Kind: "Explanation"}, e}
				return printObject(out, o.stdout, obj, []inspect.Explanation{e})
			}
			if e.Event != "" {
				fmt.Fprintf(o.stdout, "Node %s, explained at %s by Event %s:\n%s\n", e.Node, e.Time, e.Event, e.Change)
			} else {
				fmt.Fprintf(o.stdout, "Node %s, agent %s, explained at %s (addresses %s):\n", e.Node, e.Pod, e.Time, e.State)
			}
			for _, l := range e.Lines {
				fmt.Fprintln(o.stdout, l)
			}
			if e.More > 0 {
				fmt.Fprintf(o.stdout, "(%d more lines: nodeaddr --dry-run --explain on the Node prints them)\n", e.More)
			}
			return nil
		},
	}
	out = addOutputFlags(cmd, &o.noHeaders)
	return cmd
}

// explanationObject is an explanation as the printers print it: kind Explanation, then its fields.
type explanationObject struct {
	metav1.TypeMeta     `json:",inline"`
	inspect.Explanation `json:",inline"`
}

func (e *explanationObject) DeepCopyObject() runtime.Object { return jsonCopy(e) }

// lastExplanation reads the newest explanation of node's addresses: from the agent's Event about it,
// else (expired, or from an agent older than the format) from the agent pod's log.
func lastExplanation(ctx context.Context, cs kubernetes.Interface, ns, selector, node string) (inspect.Explanation, error) {
	n, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return inspect.Explanation{}, err
	}
	// Every namespace, as status searches (a recorder may choose another than default); the filter
	// in LastExplanationEvent is the same as this selector.
	fs := fields.Set{"involvedObject.kind": "Node", "involvedObject.name": node, "reason": vocab.ReasonAddressesUpdated,
		"source": vocab.EventComponent}.AsSelector().String()
	events, err := cs.CoreV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: fs})
	if err != nil {
		return inspect.Explanation{}, fmt.Errorf("list events: %w", err)
	}
	e, ok, err := inspect.LastExplanationEvent(n, events.Items)
	if err != nil || ok {
		e.Node = node
		return e, err
	}
	return explanationFromLog(ctx, cs, ns, selector, node)
}

// explanationFromLog finds the agent pod on node and reads the newest explanation from its log.
func explanationFromLog(ctx context.Context, cs kubernetes.Interface, ns, selector, node string) (inspect.Explanation, error) {
	noEvent := "no AddressesUpdated Event about Node " + node + " (Events expire after the API server's --event-ttl)"
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector, FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		return inspect.Explanation{}, fmt.Errorf("%s, and listing agent pods failed: %w", noEvent, err)
	}
	a := inspect.AgentOn(node, pods.Items)
	if a == nil {
		return inspect.Explanation{}, fmt.Errorf("%s, and no nodeaddr agent pod on Node %s (selector %s) to read the log of", noEvent, node, selector)
	}
	var opts corev1.PodLogOptions
	if c := inspect.AgentContainer(a); c != nil {
		opts.Container = c.Name
	}
	log, err := cs.CoreV1().Pods(a.Namespace).GetLogs(a.Name, &opts).DoRaw(ctx)
	if err != nil {
		return inspect.Explanation{}, fmt.Errorf("%s, and reading the log of %s/%s failed: %w", noEvent, a.Namespace, a.Name, err)
	}
	e, ok, err := inspect.LastExplanation(log)
	if err != nil {
		return inspect.Explanation{}, fmt.Errorf("log of %s/%s: %w", a.Namespace, a.Name, err)
	}
	if !ok {
		return inspect.Explanation{}, fmt.Errorf("%s, and no explanation in the log of %s/%s: the agent logs one at each change of the addresses "+
			"(an agent older than 0.2.0 none); `kubectl -n %s delete pod %s` restarts it, and it logs one at once",
			noEvent, a.Namespace, a.Name, a.Namespace, a.Name)
	}
	e.Node, e.Pod = node, a.Namespace+"/"+a.Name
	return e, nil
}
