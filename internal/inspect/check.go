package inspect

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// InstallCheck is the verdict of `nodeaddr --check-install` (the chart's `helm test`) on the
// selected Nodes: one line per Node, and whether every Node passed.
type InstallCheck struct {
	Lines []string
	OK    bool
}

// CheckInstall checks each of nodes (those the DaemonSet selects) has a ready agent and an InternalIP,
// the first thing a cluster needs from nodeaddr. No Node at all fails: the selectors match nothing.
func CheckInstall(nodes []corev1.Node, agents []corev1.Pod) InstallCheck {
	c := InstallCheck{OK: len(nodes) > 0}
	if len(nodes) == 0 {
		c.Lines = []string{"no Node matches the node selector: nothing to check"}
		return c
	}
	nodes = slices.SortedFunc(slices.Values(nodes), func(a, b corev1.Node) int { return strings.Compare(a.Name, b.Name) })
	for i := range nodes {
		line, ok := checkNode(&nodes[i], agents)
		c.Lines = append(c.Lines, line)
		c.OK = c.OK && ok
	}
	return c
}

func checkNode(n *corev1.Node, agents []corev1.Pod) (string, bool) {
	s := Status(n, agents, nil)
	a := s.Agent
	var problems []string
	switch {
	case a == nil:
		problems = append(problems, "no agent pod on it (is the DaemonSet's node selector or affinity narrower than the check's?)")
	case !a.Ready:
		problems = append(problems, fmt.Sprintf("agent %s/%s not ready (kubectl -n %s logs %s; its /readyz says why)", a.Namespace, a.Name, a.Namespace, a.Name))
	}
	if len(s.InternalIPs) == 0 {
		problems = append(problems, "no InternalIP (kubectl -n default get events --field-selector involvedObject.name="+n.Name+")")
	}
	if len(problems) > 0 {
		return n.Name + ": FAIL: " + strings.Join(problems, "; "), false
	}
	ips := strings.Join(s.InternalIPs, ",")
	return fmt.Sprintf("%s: ok: agent %s/%s ready, InternalIP %s", n.Name, a.Namespace, a.Name, ips), true
}
