package deploy

import (
	"context"
	"fmt"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

// The FlowSchema and priority level deploy/flowcontrol.yaml ships, as the kustomize base names them.
const flowName = "nodeaddr"

// On a kube-apiserver with priority and fairness (as every real cluster runs it), the kustomize base
// applied, a request made with the agent's pod-bound token is classified by the shipped FlowSchema
// into the shipped priority level (the UIDs kube-apiserver answers in X-Kubernetes-PF-FlowSchema-UID
// and X-Kubernetes-PF-PriorityLevel-UID), not by v1.37.2's kube-system-service-accounts into
// workload-high; another ServiceAccount of kube-system still lands there (the subject is the
// agent's alone).
func TestFlowSchemaClassifiesAgents(t *testing.T) {
	harness.RequireE2E(t)
	ctx := context.Background()
	cp := harness.StartControlPlaneWith(t, func(cp *harness.ControlPlane) error {
		cp.ExtraArgs = append(cp.ExtraArgs, "--enable-priority-and-fairness=true")
		return nil
	})
	const node = "node-a"
	cp.CreateNode(t, harness.NodeSpec{Name: node, Addresses: []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: node}}})
	installBase(t, cp)
	waitNotDangling(t, cp, flowName)

	path := "/api/v1/nodes/" + node
	if err := cp.WaitClassified(ctx, cp.AgentToken(t, node), path, flowName, flowName, 30*time.Second); err != nil {
		t.Fatalf("the agent's request: %v", err)
	}
	c, err := cp.Classify(ctx, cp.AgentToken(t, node), path)
	if err != nil {
		t.Fatal(err)
	}
	if c.Status != 200 {
		t.Errorf("the agent's GET of its own Node: status %d, want 200", c.Status)
	}

	// A bystander ServiceAccount of kube-system: still the default kube-system-service-accounts.
	sa, err := cp.Admin.CoreV1().ServiceAccounts("kube-system").Create(ctx,
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "bystander"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tr, err := cp.Admin.CoreV1().ServiceAccounts("kube-system").CreateToken(ctx, sa.Name, &authnv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := cp.WaitClassified(ctx, tr.Status.Token, path, "kube-system-service-accounts", "workload-high", 30*time.Second); err != nil {
		t.Errorf("another kube-system ServiceAccount: %v", err)
	}
}

// waitNotDangling waits until kube-apiserver has marked the FlowSchema name Dangling=False: its
// priority level exists.
func waitNotDangling(t *testing.T, cp *harness.ControlPlane, name string) {
	t.Helper()
	harness.Eventually(t, 30*time.Second, 100*time.Millisecond, "FlowSchema "+name+" Dangling=False", func() (bool, string) {
		fs, err := cp.Admin.FlowcontrolV1().FlowSchemas().Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range fs.Status.Conditions {
			if c.Type == "Dangling" && c.Status == "False" {
				return true, ""
			}
		}
		return false, fmt.Sprint(fs.Status.Conditions)
	})
}

// The FlowSchema's subject is the agents' ServiceAccount and it names the priority level rendered
// beside it, wherever the install goes: docs/customize.md's overlay into another namespace with a
// name prefix (its wiring), and the chart in another namespace under another name.
func TestFlowSchemaFollowsTheServiceAccount(t *testing.T) {
	harness.RequireE2E(t)
	for name, rendered := range map[string]string{
		"kustomize base":    harness.Kustomize(t, harness.DeployFile()),
		"kustomize overlay": harness.RenderKustomization(t, documentedOverlay(t, "another namespace and names")),
		"chart":             harness.HelmTemplate(t),
		"chart elsewhere":   harness.HelmTemplate(t, "--namespace", "node-agents", "--set", "fullnameOverride=addr"),
	} {
		checkFlowSchema(t, name, harness.DecodeDocs(t, rendered))
	}
	objs := harness.DecodeDocs(t, harness.HelmTemplate(t, "--set", "flowControl.enabled=false"))
	for key := range objs {
		if o := objs[key]; o["kind"] == "FlowSchema" || o["kind"] == "PriorityLevelConfiguration" {
			t.Errorf("flowControl.enabled=false still renders %s", key)
		}
	}
}

// checkFlowSchema checks the one FlowSchema of a render matches the ServiceAccount the render's one
// DaemonSet runs as (the approver's is another) and names its one priority level.
func checkFlowSchema(t *testing.T, what string, objs map[string]harness.Object) {
	t.Helper()
	var ds, sa, fs, pl []harness.Object
	for _, o := range objs {
		switch o["kind"] {
		case "DaemonSet":
			ds = append(ds, o)
		case "FlowSchema":
			fs = append(fs, o)
		case "PriorityLevelConfiguration":
			pl = append(pl, o)
		}
	}
	if len(ds) == 1 {
		for _, o := range objs {
			if o["kind"] == "ServiceAccount" && o["metadata"].(harness.Object)["name"] == ds[0]["spec"].(harness.Object)["template"].(harness.Object)["spec"].(harness.Object)["serviceAccountName"] {
				sa = append(sa, o)
			}
		}
	}
	if len(ds) != 1 || len(sa) != 1 || len(fs) != 1 || len(pl) != 1 {
		t.Errorf("%s: %d DaemonSets, %d ServiceAccounts of the agents, %d FlowSchemas, %d priority levels; want one each", what, len(ds), len(sa), len(fs), len(pl))
		return
	}
	md := sa[0]["metadata"].(harness.Object)
	spec := fs[0]["spec"].(harness.Object)
	subject := spec["rules"].([]any)[0].(harness.Object)["subjects"].([]any)[0].(harness.Object)["serviceAccount"].(harness.Object)
	if subject["namespace"] != md["namespace"] || subject["name"] != md["name"] {
		t.Errorf("%s: the FlowSchema matches ServiceAccount %v/%v, the agents run as %v/%v", what,
			subject["namespace"], subject["name"], md["namespace"], md["name"])
	}
	if got, want := spec["priorityLevelConfiguration"].(harness.Object)["name"], pl[0]["metadata"].(harness.Object)["name"]; got != want {
		t.Errorf("%s: the FlowSchema names priority level %v, the render's is %v", what, got, want)
	}
}
