package harness

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"
)

// AgentUser is the API user of the agent's ServiceAccount, as audit records name it.
const AgentUser = "system:serviceaccount:kube-system:nodeaddr"

// RepoDir is the root of the nodeaddr repository.
func RepoDir() string { return filepath.Dir(TestModuleDir()) }

// DecodeManifests decodes a multi-document YAML file into typed objects.
func DecodeManifests(data []byte) ([]runtime.Object, error) {
	var out []runtime.Object
	r := utilyaml.NewYAMLReader(bufioReader(data))
	for {
		doc, err := r.Read()
		if err != nil {
			if err.Error() == "EOF" {
				return out, nil
			}
			return nil, err
		}
		if len(bytes.TrimSpace(doc)) == 0 || strings.TrimSpace(stripComments(doc)) == "" {
			continue
		}
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(doc, nil, nil)
		if err != nil {
			return nil, err
		}
		out = append(out, obj)
	}
}

// DecodeYAMLDocs decodes multi-document YAML (a rendered chart or kustomization) into untyped
// objects, in order; a document that decodes to nothing (comments alone) is left out, one that is
// not YAML fails t.
func DecodeYAMLDocs(t testing.TB, data string) []map[string]any {
	t.Helper()
	var out []map[string]any
	r := utilyaml.NewYAMLReader(bufioReader([]byte(data)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		var o map[string]any
		if err := yaml.Unmarshal(doc, &o); err != nil {
			t.Fatalf("decode: %v\n%s", err, doc)
		}
		if o != nil {
			out = append(out, o)
		}
	}
}

func stripComments(doc []byte) string {
	var b strings.Builder
	for _, l := range strings.Split(string(doc), "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// ApplyRBAC creates the ServiceAccount, ClusterRole, Role and their bindings shipped in deploy/.
func (cp *ControlPlane) ApplyRBAC(t testing.TB) {
	t.Helper()
	if err := cp.ApplyManifest(context.Background(), filepath.Join(RepoDir(), "deploy", "rbac.yaml")); err != nil {
		t.Fatal(err)
	}
}

// ApplyPolicy creates the admission policies shipped in deploy/ (as written, i.e. rendered for
// kube-system/nodeaddr and an empty --annotations) and the ConfigMap deploy/config.yaml.
func (cp *ControlPlane) ApplyPolicy(ctx context.Context) error {
	for _, f := range []string{"config.yaml", "admission-policy.yaml"} {
		if err := cp.ApplyManifest(ctx, filepath.Join(RepoDir(), "deploy", f)); err != nil {
			return err
		}
	}
	return nil
}

// ApplyManifest creates the objects of a YAML file (ServiceAccounts, ConfigMaps, cluster RBAC
// and namespaced RBAC objects, ValidatingAdmissionPolicies with their bindings, FlowSchemas and
// PriorityLevelConfigurations).
func (cp *ControlPlane) ApplyManifest(ctx context.Context, file string) error {
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	objs, err := DecodeManifests(data)
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	for _, o := range objs {
		switch o := o.(type) {
		case *corev1.ServiceAccount:
			_, err = cp.Admin.CoreV1().ServiceAccounts(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *corev1.ConfigMap:
			_, err = cp.Admin.CoreV1().ConfigMaps(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.ClusterRole:
			_, err = cp.Admin.RbacV1().ClusterRoles().Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.ClusterRoleBinding:
			_, err = cp.Admin.RbacV1().ClusterRoleBindings().Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.Role:
			_, err = cp.Admin.RbacV1().Roles(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.RoleBinding:
			_, err = cp.Admin.RbacV1().RoleBindings(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *admissionv1.ValidatingAdmissionPolicy:
			_, err = cp.Admin.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, o, metav1.CreateOptions{})
		case *admissionv1.ValidatingAdmissionPolicyBinding:
			_, err = cp.Admin.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, o, metav1.CreateOptions{})
		case *flowcontrolv1.FlowSchema:
			_, err = cp.Admin.FlowcontrolV1().FlowSchemas().Create(ctx, o, metav1.CreateOptions{})
		case *flowcontrolv1.PriorityLevelConfiguration:
			_, err = cp.Admin.FlowcontrolV1().PriorityLevelConfigurations().Create(ctx, o, metav1.CreateOptions{})
		default:
			return fmt.Errorf("%s: cannot apply %T", file, o)
		}
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create %T: %w", o, err)
		}
	}
	return nil
}

// AgentToken returns a ServiceAccount token bound to a Pod scheduled on node, as the kubelet would
// mount for the DaemonSet pod: the token carries the node name.
func (cp *ControlPlane) AgentToken(t testing.TB, node string) string {
	t.Helper()
	token, err := cp.agentToken(context.Background(), node)
	if err != nil {
		t.Fatalf("agent token for node %s: %v", node, err)
	}
	return token
}

// NodeSpec describes a Node to create.
type NodeSpec struct {
	Name        string
	Taints      []corev1.Taint
	Addresses   []corev1.NodeAddress
	Labels      map[string]string
	Annotations map[string]string
}

// Uninitialized is the taint the kubelet adds with --cloud-provider=external.
var Uninitialized = corev1.Taint{Key: "node.cloudprovider.kubernetes.io/uninitialized", Value: "true", Effect: corev1.TaintEffectNoSchedule}

// CreateNode creates a Node and, if given, sets its status addresses (as a kubelet would).
func (cp *ControlPlane) CreateNode(t testing.TB, s NodeSpec) *corev1.Node {
	t.Helper()
	ctx := context.Background()
	n, err := cp.Admin.CoreV1().Nodes().Create(ctx, &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: s.Name, Labels: s.Labels, Annotations: s.Annotations},
		Spec:       corev1.NodeSpec{Taints: s.Taints},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create node %s: %v", s.Name, err)
	}
	if len(s.Addresses) > 0 {
		n.Status.Addresses = s.Addresses
		if n, err = cp.Admin.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{FieldManager: "kubelet"}); err != nil {
			t.Fatalf("set node %s addresses: %v", s.Name, err)
		}
	}
	return n
}

// Node reads a Node.
func (cp *ControlPlane) Node(t testing.TB, name string) *corev1.Node {
	t.Helper()
	n, err := cp.Admin.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get node %s: %v", name, err)
	}
	return n
}

// WaitNode polls the Node until cond holds or timeout passes, and returns the last copy.
func (cp *ControlPlane) WaitNode(t testing.TB, name string, timeout time.Duration, what string, cond func(*corev1.Node) bool) *corev1.Node {
	t.Helper()
	var last *corev1.Node
	Eventually(t, timeout, 50*time.Millisecond, "node "+name+": "+what, func() (bool, string) {
		n, err := cp.Admin.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			if last != nil {
				return false, fmt.Sprintf("%v; before it addresses %v taints %v", err, last.Status.Addresses, TaintKeys(last))
			}
			return false, err.Error()
		}
		last = n
		return cond(n), fmt.Sprintf("addresses %v taints %v", n.Status.Addresses, TaintKeys(n))
	})
	return last
}

// TaintKeys lists a Node's taint keys.
func TaintKeys(n *corev1.Node) []string {
	var out []string
	for _, t := range n.Spec.Taints {
		out = append(out, t.Key)
	}
	return out
}

// HasTaint reports whether the Node has a taint with key.
func HasTaint(n *corev1.Node, key string) bool {
	return slices.Contains(TaintKeys(n), key)
}

// Addr is a NodeAddress of type typ.
func Addr(typ corev1.NodeAddressType, address string) corev1.NodeAddress {
	return corev1.NodeAddress{Type: typ, Address: address}
}

// FormatAddrs prints addresses as [InternalIP=10.0.0.2 Hostname=n1].
func FormatAddrs(a []corev1.NodeAddress) string {
	var parts []string
	for _, x := range a {
		parts = append(parts, string(x.Type)+"="+x.Address)
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// WaitEvents waits up to timeout until exactly n Events with reason exist about node, and returns
// them; more than n fails at once.
func (cp *ControlPlane) WaitEvents(t testing.TB, node, reason string, n int, timeout time.Duration) []corev1.Event {
	t.Helper()
	var evs []corev1.Event
	Eventually(t, timeout, 50*time.Millisecond, fmt.Sprintf("%d %s Events about Node %s", n, reason, node), func() (bool, string) {
		evs = cp.Events(t, node, reason)
		if len(evs) > n {
			t.Fatalf("%s events = %d, want %d", reason, len(evs), n)
		}
		return len(evs) == n, fmt.Sprintf("%d Events", len(evs))
	})
	return evs
}

// Events lists the Events about a Node with the given reason.
func (cp *ControlPlane) Events(t testing.TB, node, reason string) []corev1.Event {
	t.Helper()
	list, err := cp.Admin.CoreV1().Events("default").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []corev1.Event
	for _, e := range list.Items {
		if e.InvolvedObject.Kind == "Node" && e.InvolvedObject.Name == node && e.Reason == reason {
			out = append(out, e)
		}
	}
	return out
}

// Writes counts the agent's completed write requests to a Node (patch/update), by subresource
// ("" or "status").
func (cp *ControlPlane) Writes(t testing.TB, node string) map[string]int {
	t.Helper()
	evs, err := cp.Audit(AgentUser)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, e := range evs {
		if e.ObjectRef == nil || e.ObjectRef.Resource != "nodes" || e.ObjectRef.Name != node {
			continue
		}
		if e.Verb == "patch" || e.Verb == "update" {
			out[e.ObjectRef.Subresource]++
		}
	}
	return out
}

// Kubeconfig writes a kubeconfig for server with token and returns its path (world-readable, so an
// agent running as an unprivileged user can read it).
func Kubeconfig(t testing.TB, dir, server, token string) string {
	t.Helper()
	return insecureKubeconfig(t, dir, server, "token: "+token)
}

// KubeconfigTokenFile is Kubeconfig with the token read from tokenFile, as a pod's projected
// token: client-go re-reads the file, so rewriting it renews the token.
func KubeconfigTokenFile(t testing.TB, dir, server, tokenFile string) string {
	t.Helper()
	return insecureKubeconfig(t, dir, server, "tokenFile: "+tokenFile)
}

// insecureKubeconfig writes dir/kubeconfig for server (its certificate not verified; the real
// node's writeKubeconfig verifies it) whose one user has the credential line cred.
func insecureKubeconfig(t testing.TB, dir, server, cred string) string {
	t.Helper()
	p := filepath.Join(dir, "kubeconfig")
	data := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: test
  cluster:
    server: %s
    insecure-skip-tls-verify: true
users:
- name: nodeaddr
  user:
    %s
contexts:
- name: test
  context: {cluster: test, user: nodeaddr}
current-context: test
`, server, cred)
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func bufioReader(b []byte) *bufio.Reader { return bufio.NewReader(bytes.NewReader(b)) }

// Run runs a command with stdin (none when empty) and returns its combined output, failing the
// test on error.
func Run(t testing.TB, stdin string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, out)
	}
	return string(out)
}
