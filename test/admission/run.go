// Package admission is the admission policy's table on a real API server: who sends which write and
// whether deploy/admission-policy.yaml lets it through, or the words of its denial. Table (table.go)
// is the one list of these cases; test/deploy runs it on the pinned release (TestAdmission) and
// test/matrix on every release of the matrix. Run is the runner: each case gets a fresh pair of
// Nodes, so a line needs no other line.
package admission

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

// The policies of deploy/admission-policy.yaml, as a denial names them.
const (
	OwnNode = "nodeaddr-own-node"
	Events  = "nodeaddr-events"
	rbac    = "RBAC"
)

// Who sends a case's write.
type Who string

const (
	// Agent is the nodeaddr ServiceAccount's token bound to a pod on the case's own Node, issued
	// before the case's setup (as the DaemonSet pod's).
	Agent Who = "agent"
	// AgentNewPod is the same ServiceAccount's token bound to a pod created after the setup.
	AgentNewPod Who = "agent (new pod)"
	// NoNode is the nodeaddr ServiceAccount's token bound to no pod, so carrying no node.
	NoNode Who = "agent token without a node"
	// Kubelet is the own Node's kubelet (system:node:NAME in system:nodes); OtherKubelet the other
	// Node's.
	Kubelet      Who = "kubelet"
	OtherKubelet Who = "other kubelet"
	// Admin is system:masters.
	Admin Who = "admin"
)

// manager is the field manager each sender writes as: the agent's binary writes as nodeaddr.
func (w Who) manager() string {
	switch w {
	case Agent, AgentNewPod, NoNode:
		return "nodeaddr"
	case Kubelet, OtherKubelet:
		return "kubelet"
	}
	return "kubectl"
}

// The Nodes of a case, as bodies, names and messages spell them: $OWN (the agent's), $OTHER, and
// their UIDs $OWN_UID, $OTHER_UID.
const (
	Own   = "$OWN"
	Other = "$OTHER"
)

// Case is one line of the table.
type Case struct {
	Name string
	As   Who
	Req  Request
	Want Want
}

// Group is a subject of the table: its cases run as subtests TestX/<group>/<case>.
type Group struct {
	Name  string
	Cases []Case
}

// Want is a case's expected answer: Allowed, Denied(policy, words) or DeniedByRBAC.
type Want struct {
	by, why string
	others  []Who
	check   func(w *World) string
}

// Allowed is an answer without error.
var Allowed = Want{}

// Denied is a 403 of policy (reason Forbidden) whose message contains why ($OWN and $OTHER
// expanded; "" for any message). The objects the write aimed at do not change.
func Denied(policy, why string) Want { return Want{by: policy, why: why} }

// DeniedByRBAC is the authorizer's refusal.
var DeniedByRBAC = Want{by: rbac}

// AllowedFor adds that each of who, sending the same write on a fresh pair of Nodes, is allowed:
// what the policy denies the agent stays open to the others.
func (w Want) AllowedFor(who ...Who) Want {
	w.others = append(slices.Clone(w.others), who...)
	return w
}

// Then adds a check of the world after an allowed write: a message when it fails, else "".
func (w Want) Then(check func(w *World) string) Want {
	if prev := w.check; prev != nil {
		w.check = func(wd *World) string {
			if msg := prev(wd); msg != "" {
				return msg
			}
			return check(wd)
		}
		return w
	}
	w.check = check
	return w
}

// Request is a write (or a creation) a case sends.
type Request struct {
	what   string
	do     func(ctx context.Context, w *World, cs kubernetes.Interface, manager string) error
	target func(w *World) string // the resourceVersion(s) a denial must leave unchanged
	setup  []Step
	mgr    string
}

// After returns r preceded by steps, each of which must succeed.
func (r Request) After(steps ...Step) Request {
	r.setup = append(slices.Clone(r.setup), steps...)
	return r
}

// Manager returns r sent under field manager m instead of the sender's own.
func (r Request) Manager(m string) Request { r.mgr = m; return r }

// Step prepares a case's world.
type Step struct {
	what string
	do   func(ctx context.Context, w *World) error
}

// As is a step: who sends r, which must be allowed.
func As(who Who, r Request) Step {
	return Step{what: fmt.Sprintf("%s: %s", who, r.what), do: func(ctx context.Context, w *World) error {
		for _, s := range r.setup {
			if err := s.do(ctx, w); err != nil {
				return fmt.Errorf("%s: %w", s.what, err)
			}
		}
		return r.send(ctx, w, w.client(who), who)
	}}
}

func (r Request) send(ctx context.Context, w *World, cs kubernetes.Interface, who Who) error {
	m := r.mgr
	if m == "" {
		m = who.manager()
	}
	return r.do(ctx, w, cs, m)
}

// World is one case's pair of Nodes on the API server.
type World struct {
	t          testing.TB
	cp         *harness.ControlPlane
	Own, Other string
	clients    map[Who]kubernetes.Interface
}

// NodeSpec is every case's Node: the uninitialized taint and another, a label, a foreign annotation
// and a kubelet's addresses (Hostname, InternalDNS, InternalIP).
func NodeSpec(name string) harness.NodeSpec {
	return harness.NodeSpec{Name: name, Taints: []corev1.Taint{harness.Uninitialized, Dedicated},
		Labels: map[string]string{"example.com/role": "worker"}, Annotations: map[string]string{"example.com/owner": "ops"},
		Addresses: []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: name}, {Type: corev1.NodeInternalDNS, Address: name + ".internal"},
			{Type: corev1.NodeInternalIP, Address: "10.0.0.5"}}}
}

// Dedicated is a taint not the agent's.
var Dedicated = corev1.Taint{Key: "example.com/dedicated", Value: "db", Effect: corev1.TaintEffectNoSchedule}

// Node reads a Node of the world.
func (w *World) Node(name string) *corev1.Node { return w.cp.Node(w.t, w.expand(name)) }

func (w *World) expand(s string) string {
	if !strings.Contains(s, "$") {
		return s
	}
	r := []string{"$OWN_UID", string(w.Node(w.Own).UID), "$OTHER_UID", string(w.Node(w.Other).UID), "$OWN", w.Own, "$OTHER", w.Other}
	return strings.NewReplacer(r...).Replace(s)
}

func (w *World) client(who Who) kubernetes.Interface {
	if cs, ok := w.clients[who]; ok {
		return cs
	}
	var cs kubernetes.Interface
	switch who {
	case Agent, AgentNewPod:
		cs = TokenClient(w.t, w.cp, w.cp.AgentToken(w.t, w.Own))
	case NoNode:
		exp := int64(600)
		tr, err := w.cp.Admin.CoreV1().ServiceAccounts("kube-system").CreateToken(context.Background(), "nodeaddr",
			&authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{ExpirationSeconds: &exp}}, metav1.CreateOptions{})
		if err != nil {
			w.t.Fatal(err)
		}
		cs = TokenClient(w.t, w.cp, tr.Status.Token)
	case Kubelet:
		cs = w.cp.AsKubelet(w.t, w.Own)
	case OtherKubelet:
		cs = w.cp.AsKubelet(w.t, w.Other)
	case Admin:
		cs = w.cp.Admin
	default:
		w.t.Fatalf("no client for %q", who)
	}
	w.clients[who] = cs
	return cs
}

// TokenClient is a client with a bearer token.
func TokenClient(t testing.TB, cp *harness.ControlPlane, token string) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: cp.Config.Host, BearerToken: token,
		TLSClientConfig: rest.TLSClientConfig{Insecure: true}})
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// Run sends every case of groups on cp, where the shipped RBAC and admission policies are applied:
// each case as a subtest (in parallel; each on its own pair of Nodes), after waiting until both
// policies are enforced.
func Run(t *testing.T, cp *harness.ControlPlane, groups []Group) {
	waitEnforced(t, cp)
	n := 0
	for _, g := range groups {
		t.Run(g.Name, func(t *testing.T) {
			for _, c := range g.Cases {
				n++
				id := n
				t.Run(c.Name, func(t *testing.T) {
					t.Parallel()
					runCase(t, cp, id, c)
				})
			}
		})
	}
}

// Count is the number of cases of groups.
func Count(groups []Group) int {
	n := 0
	for _, g := range groups {
		n += len(g.Cases)
	}
	return n
}

func newWorld(t *testing.T, cp *harness.ControlPlane, id int, suffix string) *World {
	w := &World{t: t, cp: cp, Own: fmt.Sprintf("c%03d%s-own", id, suffix), Other: fmt.Sprintf("c%03d%s-other", id, suffix),
		clients: map[Who]kubernetes.Interface{}}
	for _, n := range []string{w.Own, w.Other} {
		cp.CreateNode(t, NodeSpec(n))
	}
	return w
}

func runCase(t *testing.T, cp *harness.ControlPlane, id int, c Case) {
	ctx := context.Background()
	w := newWorld(t, cp, id, "")
	var cs kubernetes.Interface
	if c.As != AgentNewPod {
		cs = w.client(c.As)
	}
	for _, s := range c.Req.setup {
		if err := s.do(ctx, w); err != nil {
			t.Fatalf("setup %s: %v", s.what, err)
		}
	}
	if cs == nil {
		cs = w.client(c.As)
	}
	var before string
	if c.Req.target != nil {
		before = c.Req.target(w)
	}
	err := c.Req.send(ctx, w, cs, c.As)
	what := w.expand(c.Req.what)
	switch want := c.Want; {
	case want.by == "":
		if err != nil {
			t.Fatalf("%s as %s: denied, want allowed: %v", what, c.As, short(err))
		}
		if want.check != nil {
			if msg := want.check(w); msg != "" {
				t.Errorf("after %s as %s: %s", what, c.As, msg)
			}
		}
	case want.by == rbac:
		if !harness.DeniedByRBAC(err) {
			t.Errorf("%s as %s: got %v, want a refusal by RBAC", what, c.As, short(err))
		}
	default:
		if !harness.DeniedBy(err, want.by) {
			t.Errorf("%s as %s: got %v, want a 403 from %s", what, c.As, short(err), want.by)
		} else if why := w.expand(want.why); !strings.Contains(err.Error(), why) {
			t.Errorf("%s as %s: denial %q does not say %q", what, c.As, short(err), why)
		}
	}
	if want := c.Want; want.by != "" && c.Req.target != nil {
		if after := c.Req.target(w); after != before {
			t.Errorf("%s as %s: denied, and yet its target changed (resourceVersion %s -> %s)", what, c.As, before, after)
		}
	}
	for i, who := range c.Want.others {
		ow := newWorld(t, cp, id, fmt.Sprintf("x%d", i))
		ocs := ow.client(who)
		for _, s := range c.Req.setup {
			if err := s.do(ctx, ow); err != nil {
				t.Fatalf("setup %s: %v", s.what, err)
			}
		}
		if err := c.Req.send(ctx, ow, ocs, who); err != nil {
			t.Errorf("%s as %s: %v, want allowed", ow.expand(c.Req.what), who, short(err))
		}
	}
}

// short shortens an error that may quote a megabyte.
func short(err error) string {
	if err == nil {
		return "<nil>"
	}
	if s := err.Error(); len(s) > 400 {
		return s[:400] + "..."
	}
	return err.Error()
}

// waitEnforced waits until the agent's write to another Node is denied by the Node policy and its
// Event about another Node by the events policy: a new policy takes a moment to reach admission.
func waitEnforced(t *testing.T, cp *harness.ControlPlane) {
	t.Helper()
	ctx := context.Background()
	w := newWorld(t, cp, 0, "probe")
	agent := w.client(Agent)
	probes := []struct {
		policy string
		r      Request
	}{
		{OwnNode, Patch(Other, "status", `{"status":{"addresses":[{"type":"ExternalIP","address":"192.0.2.99"}]}}`)},
		{Events, CreateEvent(AboutOther)},
	}
	for _, p := range probes {
		harness.Eventually(t, 30*time.Second, 100*time.Millisecond, fmt.Sprintf("%s enforced (fail open?): %s", p.policy, p.r.what), func() (bool, string) {
			err := p.r.send(ctx, w, agent, Agent)
			return harness.DeniedBy(err, p.policy), short(err)
		})
	}
}

// nodeRV is the resourceVersion of a Node of the world.
func nodeRV(node string) func(w *World) string {
	return func(w *World) string { return w.Node(node).ResourceVersion }
}

// bothNodes is the resourceVersions of both Nodes.
func bothNodes(w *World) string { return nodeRV(Own)(w) + "," + nodeRV(Other)(w) }

// Patch is a JSON merge patch of node (Own or Other) through subresource ("" or "status"); body
// may name $OWN, $OTHER and their UIDs.
func Patch(node, subresource, body string) Request {
	return patchOf(node, subresource, types.MergePatchType, func(w *World) (string, error) { return body, nil },
		fmt.Sprintf("merge patch of %s%s %s", node, sub(subresource), body))
}

// JSONPatch is a JSON patch of node whose body build returns from the current world.
func JSONPatch(node, subresource, what string, build func(w *World) (any, error)) Request {
	return patchOf(node, subresource, types.JSONPatchType, func(w *World) (string, error) {
		v, err := build(w)
		if err != nil {
			return "", err
		}
		b, err := json.Marshal(v)
		return string(b), err
	}, fmt.Sprintf("JSON patch of %s%s: %s", node, sub(subresource), what))
}

func sub(s string) string {
	if s == "" {
		return ""
	}
	return "/" + s
}

func patchOf(node, subresource string, pt types.PatchType, body func(w *World) (string, error), what string) Request {
	return Request{what: what, target: bothNodes, do: func(ctx context.Context, w *World, cs kubernetes.Interface, manager string) error {
		b, err := body(w)
		if err != nil {
			return err
		}
		var subs []string
		if subresource != "" {
			subs = []string{subresource}
		}
		_, err = cs.CoreV1().Nodes().Patch(ctx, w.expand(node), pt, []byte(w.expand(b)), metav1.PatchOptions{FieldManager: manager}, subs...)
		return err
	}}
}

// Taints is the agent's own kind of taint write: a JSON patch that tests node's current taints and
// replaces them with edit's.
func Taints(node, what string, edit func([]corev1.Taint) []corev1.Taint) Request {
	return JSONPatch(node, "", what, func(w *World) (any, error) {
		old := w.Node(node).Spec.Taints
		return []map[string]any{{"op": "test", "path": "/spec/taints", "value": old},
			{"op": "replace", "path": "/spec/taints", "value": edit(slices.Clone(old))}}, nil
	})
}

// Without removes the taint key.
func Without(key string) func([]corev1.Taint) []corev1.Taint {
	return func(ts []corev1.Taint) []corev1.Taint {
		return slices.DeleteFunc(ts, func(t corev1.Taint) bool { return t.Key == key })
	}
}

// Plus adds a taint.
func Plus(t corev1.Taint) func([]corev1.Taint) []corev1.Taint {
	return func(ts []corev1.Taint) []corev1.Taint { return append(ts, t) }
}

// Addresses is the agent's own kind of address write to its Node: a JSON patch of nodes/status
// that tests the current status.addresses and replaces them with addrs, each "Type=address"
// ($OWN expanded).
func Addresses(addrs ...string) Request {
	return JSONPatch(Own, "status", strings.Join(addrs, ", "), func(w *World) (any, error) {
		var list []corev1.NodeAddress
		for _, a := range addrs {
			typ, addr, ok := strings.Cut(a, "=")
			if !ok {
				return nil, fmt.Errorf("address %q is not Type=address", a)
			}
			list = append(list, corev1.NodeAddress{Type: corev1.NodeAddressType(typ), Address: w.expand(addr)})
		}
		return []map[string]any{{"op": "test", "path": "/status/addresses", "value": w.Node(Own).Status.Addresses},
			{"op": "replace", "path": "/status/addresses", "value": list}}, nil
	})
}

// BaseAddresses are NodeSpec's addresses of the own Node.
var BaseAddresses = []string{"Hostname=$OWN", "InternalDNS=$OWN.internal", "InternalIP=10.0.0.5"}

// AddAddresses is Addresses of BaseAddresses and extra.
func AddAddresses(extra ...string) Request {
	return Addresses(append(slices.Clone(BaseAddresses), extra...)...)
}

// ManagedFields is a JSON patch of the own Node (through nodes) that replaces its managedFields
// with edit's and adds a nodeaddr.io/ annotation (which alone the agent may write).
func ManagedFields(what string, edit func(w *World, managed []metav1.ManagedFieldsEntry) []metav1.ManagedFieldsEntry) Request {
	return JSONPatch(Own, "", what, func(w *World) (any, error) {
		entries := edit(w, slices.Clone(w.Node(Own).ManagedFields))
		return []map[string]any{{"op": "replace", "path": "/metadata/managedFields", "value": entries},
			{"op": "add", "path": "/metadata/annotations/nodeaddr.io~1k0", "value": time.Now().String()}}, nil
	})
}

// NodeEvent is the agent's Event about its own Node, as its recorder writes it, with edit applied.
func NodeEvent(w *World, edit func(e *corev1.Event, w *World)) *corev1.Event {
	n := w.Node(Own)
	ev := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{GenerateName: n.Name + ".", Namespace: "default"},
		InvolvedObject: corev1.ObjectReference{Kind: "Node", APIVersion: "v1", Name: n.Name, UID: n.UID},
		Reason:         "AddressesUpdated", Message: "Addresses changed", Type: corev1.EventTypeNormal, Count: 1,
		Source:         corev1.EventSource{Component: "nodeaddr", Host: n.Name},
		FirstTimestamp: metav1.Now(), LastTimestamp: metav1.Now(),
	}
	if edit != nil {
		edit(ev, w)
	}
	return ev
}

// CreateEvent creates the agent's Event about its own Node with edit applied (nil: as is).
func CreateEvent(edit func(e *corev1.Event, w *World)) Request {
	return Request{what: "create an Event", do: func(ctx context.Context, w *World, cs kubernetes.Interface, _ string) error {
		ev := NodeEvent(w, edit)
		_, err := cs.CoreV1().Events(ev.Namespace).Create(ctx, ev, metav1.CreateOptions{})
		return err
	}}
}

// NamedEvent creates an Event named name (expanded) about node from component, as the sender.
func NamedEvent(name, node, component string) Request {
	return Request{what: "create Event " + name, do: func(ctx context.Context, w *World, cs kubernetes.Interface, _ string) error {
		ev := NodeEvent(w, func(e *corev1.Event, w *World) {
			n := w.Node(node)
			e.GenerateName, e.Name = "", w.expand(name)
			e.InvolvedObject.Name, e.InvolvedObject.UID = n.Name, n.UID
			e.Source = corev1.EventSource{Component: component, Host: n.Name}
			if component == "kubelet" {
				e.Reason, e.Type, e.Message = "Rebooted", corev1.EventTypeWarning, "Node "+n.Name+" has been rebooted, boot id: 1234"
			}
		})
		_, err := cs.CoreV1().Events(ev.Namespace).Create(ctx, ev, metav1.CreateOptions{})
		return err
	}}
}

// PatchEvent is a strategic merge patch of the Event name (expanded) in default.
func PatchEvent(name, body string) Request {
	return Request{what: fmt.Sprintf("patch Event %s with %.200s", name, body),
		target: func(w *World) string {
			ev, err := w.cp.Admin.CoreV1().Events("default").Get(context.Background(), w.expand(name), metav1.GetOptions{})
			if err != nil {
				return err.Error()
			}
			return ev.ResourceVersion
		},
		do: func(ctx context.Context, w *World, cs kubernetes.Interface, _ string) error {
			_, err := cs.CoreV1().Events("default").Patch(ctx, w.expand(name), types.StrategicMergePatchType, []byte(w.expand(body)), metav1.PatchOptions{})
			return err
		}}
}

// CreateEventV1 creates an events.k8s.io/v1 Event about the own Node.
func CreateEventV1() Request {
	return Request{what: "create an events.k8s.io Event", do: func(ctx context.Context, w *World, cs kubernetes.Interface, _ string) error {
		n := w.Node(Own)
		ev := &eventsv1.Event{
			ObjectMeta: metav1.ObjectMeta{GenerateName: n.Name + "-", Namespace: "default"},
			EventTime:  metav1.NowMicro(), ReportingController: "nodeaddr", ReportingInstance: n.Name,
			Action: "Update", Reason: "AddressesUpdated", Type: corev1.EventTypeNormal, Note: "x",
			Regarding: corev1.ObjectReference{Kind: "Node", APIVersion: "v1", Name: n.Name, UID: n.UID},
		}
		_, err := cs.EventsV1().Events("default").Create(ctx, ev, metav1.CreateOptions{})
		return err
	}}
}

// AboutOther turns the agent's Event into one about the other Node.
func AboutOther(e *corev1.Event, w *World) {
	n := w.Node(Other)
	e.InvolvedObject.Name, e.InvolvedObject.UID = n.Name, n.UID
}

// Do is a step of its own.
func Do(what string, f func(ctx context.Context, w *World) error) Step {
	return Step{what: what, do: f}
}

// RecreateOwn deletes the own Node and creates it again under its name (a new UID).
var RecreateOwn = Do("delete and recreate the own Node", func(ctx context.Context, w *World) error {
	if err := w.cp.Admin.CoreV1().Nodes().Delete(ctx, w.Own, metav1.DeleteOptions{}); err != nil {
		return err
	}
	w.cp.CreateNode(w.t, NodeSpec(w.Own))
	return nil
})
