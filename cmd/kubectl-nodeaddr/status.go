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
	"k8s.io/client-go/kubernetes"

	"github.com/nodeaddr/nodeaddr/internal/inspect"
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
