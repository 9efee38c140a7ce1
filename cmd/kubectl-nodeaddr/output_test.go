package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/nodeaddr/nodeaddr/internal/csrapproval/rules/rulestest"
	"github.com/nodeaddr/nodeaddr/internal/inspect"
	"github.com/nodeaddr/nodeaddr/internal/vocab"
)

// TestOutputFormats: every -o of kubectl get, on each command's object: cli-runtime's printers
// (json, yaml, kyaml, name, jsonpath, jsonpath-file, jsonpath-as-json, go-template,
// go-template-file, template, templatefile, --template), wide and custom-columns
// (custom-columns-file); the templates of the commands' --help examples among them. The exit code
// does not depend on the format.
func TestOutputFormats(t *testing.T) {
	kc := kubeconfig(t, startAPI(t, scene()...).URL)
	file := func(name, content string) string {
		p := filepath.Join(t.TempDir(), name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		args []string
		want string
		code int
	}{
		{[]string{"status", "-o", "name"}, "node/node-a\nnode/node-b\nnode/node-c\n", 0},
		{[]string{"status", "-o", "jsonpath={.items[*].node}"}, "node-a node-b node-c", 0},
		{[]string{"status", "-o", "jsonpath-file=" + file("path", "{.items[0].agent.name}")}, "nodeaddr-a", 0},
		{[]string{"status", "-o", "jsonpath-as-json={.items[*].node}"}, "[\n    \"node-a\",\n    \"node-b\",\n    \"node-c\"\n]\n", 0},
		// status's example: the Nodes that need attention.
		{[]string{"status", "-o", `go-template={{range .items}}{{if .attention}}{{.node}}{{"\n"}}{{end}}{{end}}`}, "node-c\n", 0},
		{[]string{"status", "-o", "go-template-file=" + file("tmpl", "{{len .items}}")}, "3", 0},
		{[]string{"status", "-o", "template={{.kind}}"}, "NodeStatusList", 0},
		{[]string{"status", "-o", "templatefile=" + file("tmpl", "{{.kind}}")}, "NodeStatusList", 0},
		{[]string{"status", "--template", "{{(index .items 1).agent.version}}"}, "0.2.0", 0},
		{[]string{"status", "-o", "custom-columns=NODE:.node,INTERNAL:.internalIPs[*],AGENT:agent.name,MISSING:{.nope}"},
			"NODE    INTERNAL  AGENT       MISSING\nnode-a  10.0.0.2  nodeaddr-a  <none>\nnode-b  10.0.0.3  nodeaddr-b  <none>\nnode-c  <none>    <none>      <none>\n", 0},
		{[]string{"status", "--no-headers", "-o", "custom-columns=NODE:.node,READY:.agent.ready"}, "node-a  true\nnode-b  true\nnode-c  <none>\n", 0},
		{[]string{"status", "-o", "custom-columns-file=" + file("columns", "NODE   ATTENTION\n.node  .attention[*]\n")},
			"NODE    ATTENTION\nnode-a  <none>\nnode-b  <none>\nnode-c  no-agent\n", 0},
		{[]string{"status", "-o", "wide", "--no-headers", "node-b"}, "  node-b  10.0.0.3  <none>  -  -  no  kube-system/nodeaddr-b  yes  0  0.2.0  -  -\n", 0},

		{[]string{"stale", "--kubelet-certs=false", "-o", "name"}, "pod/nodeaddr-a\n", 1},
		// stale's example: the fix commands.
		{[]string{"stale", "--kubelet-certs=false", "-o", `jsonpath={range .items[?(@.state=="stale")]}{.fix}{"\n"}{end}`},
			"kubectl -n kube-system delete pod nodeaddr-a\n", 1},
		{[]string{"stale", "--kubelet-certs=false", "-o", "custom-columns=OBJECT:.name,ADDRESS:.address"}, "OBJECT      ADDRESS\nnodeaddr-a  10.0.0.12\n", 1},
		{[]string{"stale", "--kubelet-certs=false", "-o", "name", "node-b"}, "", 0},

		{[]string{"explain", "node-a", "-o", "name"}, "node/node-a\n", 0},
		// explain's example: the addresses chosen.
		{[]string{"explain", "node-a", "-o", `jsonpath={range .lines[?(@.chosen==true)]}{.type} {.address}{"\n"}{end}`}, "InternalIP 10.0.0.2\n", 0},
		{[]string{"explain", "node-a", "-o", "custom-columns=POD:.pod,TIME:.time,ADDRESSES:.lines[*].address"},
			"POD                     TIME                      ADDRESSES\nkube-system/nodeaddr-a  2026-12-04T08:10:00.000Z  10.0.0.2\n", 0},
		{[]string{"explain", "node-a"}, "Node node-a, agent kube-system/nodeaddr-a, explained at 2026-12-04T08:10:00.000Z (addresses [InternalIP=10.0.0.2]):\n" +
			"InternalIP IPv4 10.0.0.2 (route to 8.8.8.8): chosen\nInternalIP IPv6: no target of this family: not published\n", 0},
	}
	for _, tt := range tests {
		stdout, stderr, code := runPlugin(append(tt.args, "--kubeconfig", kc)...)
		if stdout != tt.want || code != tt.code {
			t.Errorf("%q: exit %d (want %d), stderr %q, stdout:\n%s\nwant:\n%s", tt.args, code, tt.code, stderr, stdout, tt.want)
		}
	}
}

// TestObjectOutput: -o json keeps the stable structure, kind first then items (or the
// explanation's fields), and json, yaml and kyaml print the same object.
func TestObjectOutput(t *testing.T) {
	kc := kubeconfig(t, startAPI(t, scene()...).URL)
	for _, tc := range []struct {
		args   []string
		prefix string
	}{
		{[]string{"status", "node-a"}, "{\n    \"kind\": \"NodeStatusList\",\n    \"items\": [\n        {\n            \"node\": \"node-a\",\n"},
		{[]string{"stale", "--kubelet-certs=false"}, "{\n    \"kind\": \"StaleList\",\n    \"items\": [\n        {\n            \"kind\": \"pod\",\n"},
		{[]string{"explain", "node-a"}, "{\n    \"kind\": \"Explanation\",\n    \"node\": \"node-a\",\n    \"pod\": \"kube-system/nodeaddr-a\",\n"},
	} {
		var objects []map[string]any
		for _, format := range []string{"json", "yaml", "kyaml"} {
			stdout, stderr, _ := runPlugin(append(tc.args, "-o", format, "--kubeconfig", kc)...)
			if format == "json" && !strings.HasPrefix(stdout, tc.prefix) {
				t.Errorf("%q -o json:\n%s\nwant it to start with:\n%s", tc.args, stdout, tc.prefix)
			}
			var obj map[string]any
			if err := yaml.Unmarshal([]byte(stdout), &obj); err != nil {
				t.Fatalf("%q -o %s: %v (stderr %q)\n%s", tc.args, format, err, stderr, stdout)
			}
			objects = append(objects, obj)
		}
		for i, format := range []string{"yaml", "kyaml"} {
			if a, b := mustJSON(t, objects[0]), mustJSON(t, objects[i+1]); a != b {
				t.Errorf("%q: -o %s is\n%s\n-o json is\n%s", tc.args, format, b, a)
			}
		}
	}
}

// TestNameOutput: -o name names the API object of each finding kind as kubectl does, each once.
func TestNameOutput(t *testing.T) {
	found := []inspect.Finding{
		{Kind: inspect.KindPod, Namespace: "ns", Name: "p", Address: "10.0.0.1"},
		{Kind: inspect.KindPod, Namespace: "ns", Name: "p", Address: "fd00::1"},
		{Kind: inspect.KindEndpointSlice, Namespace: "ns", Name: "e"},
		{Kind: inspect.KindServingCert, Name: "n"},
		{Kind: inspect.KindCSR, Name: "c"},
	}
	s := &staleOptions{options: &options{}}
	cmd := &cobra.Command{}
	s.out = addOutputFlags(cmd, &s.noHeaders)
	if err := cmd.Flags().Set("output", "name"); err != nil {
		t.Fatal(err)
	}
	if err := s.out.complete(cmd); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := s.print(&out, found); err != nil {
		t.Fatal(err)
	}
	if want := "pod/p\nendpointslice.discovery.k8s.io/e\nnode/n\ncertificatesigningrequest.certificates.k8s.io/c\n"; out.String() != want {
		t.Errorf("-o name:\n%s\nwant:\n%s", out.String(), want)
	}
}

// TestParseCustomColumns: kubectl's forms of a column's path, and its errors.
func TestParseCustomColumns(t *testing.T) {
	c, err := parseCustomColumns("A:a.b,B:.a.b,C:{a.b},D:{.a.b},E:.items[*].x", false)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(c.paths, " "); got != "{.a.b} {.a.b} {.a.b} {.a.b} {.items[*].x}" {
		t.Errorf("paths %s", got)
	}
	for spec, want := range map[string]string{
		"NODE":        "unexpected custom-columns spec: NODE, expected <header>:<json-path-expr>",
		"NODE:{a}{b}": `unexpected path string "{a}{b}"`,
		"NODE:.a[":    "custom column NODE: unterminated array",
	} {
		if _, err := parseCustomColumns(spec, false); err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%q: error %v, want %q", spec, err, want)
		}
	}
	if _, err := parseCustomColumnsFile(strings.NewReader("A B\n.a\n"), false); err == nil ||
		err.Error() != "number of headers (2) and field specifications (1) don't match" {
		t.Errorf("file with 2 headers, 1 path: %v", err)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestStaleCSRAdvice: stale reads the approver's facts with the user's credentials, and its flags
// from its Deployment. The kubelet's CSR for the addresses its agent published is to approve; when
// the ServiceCIDRs or the Deployments cannot be read, stale cannot tell and advises nothing; when
// the CSR names an address the agent did not publish, or the approver's --allowed-ip-prefixes
// leave one of its addresses out, it is to deny, with the approver's reason.
func TestStaleCSRAdvice(t *testing.T) {
	n := &corev1.Node{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Node"}, ObjectMeta: metav1.ObjectMeta{Name: "node-a",
		Annotations: map[string]string{vocab.RecordAnnotation: "10.0.0.5,fd00::5"}},
		Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.5"},
			{Type: corev1.NodeInternalIP, Address: "fd00::5"}}}}
	csr := func(name string, ips ...string) *certificatesv1.CertificateSigningRequest {
		c := rulestest.Build(t, rulestest.CSRSpec{IPs: ips, DNS: []string{"node-a"}})
		c.Name, c.CreationTimestamp = name, metav1.NewTime(time.Now().Add(-time.Hour))
		return c
	}
	approver := func(args ...string) *appsv1.Deployment {
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "nodeaddr-approver"}}
		d.Spec.Template.Spec.Containers = []corev1.Container{{Name: "approver", Args: append([]string{"approver",
			"--leader-elect=true", "--leader-election-id", "nodeaddr-approver"}, args...)}}
		return d
	}
	for _, tc := range []struct {
		forbid   string
		csr      *certificatesv1.CertificateSigningRequest
		approver *appsv1.Deployment
		fix      string
		where    string // its end
	}{
		{"", csr("csr-good", "10.0.0.5", "fd00::5"), nil, "kubectl certificate approve csr-good", "pending 1h"},
		{"", csr("csr-good", "10.0.0.5", "fd00::5"), approver(), "kubectl certificate approve csr-good", "pending 1h"},
		{"", csr("csr-good", "10.0.0.5", "fd00::5"), approver("--allowed-ip-prefixes=10.0.0.0/24,fd00::/64"),
			"kubectl certificate approve csr-good", "pending 1h"},
		{"", csr("csr-good", "10.0.0.5", "fd00::5"), approver("--allowed-ip-prefixes", "10.0.0.0/24"), "kubectl certificate deny csr-good",
			"refused (IPNotAllowed): IP fd00::5 is outside the allowed prefixes [10.0.0.0/24]"},
		{"", csr("csr-good", "10.0.0.5", "fd00::5"), approver("--max-sans=2"), "kubectl certificate deny csr-good",
			"refused (TooManySANs): 3 subject alternative names, at most 2 allowed"},
		{"", csr("csr-good", "10.0.0.5", "fd00::5"), approver("--allowed-ip-prefixes=bad"), "-",
			`cannot tell whether the approver would approve it: the flags of deployment kube-system/nodeaddr-approver: --allowed-ip-prefixes: "bad" is not a CIDR`},
		{"deployments", csr("csr-good", "10.0.0.5", "fd00::5"), nil, "-", "cannot tell whether the approver would approve it: list deployments: " +
			`deployments is forbidden: User "nobody" cannot list resource "deployments" in API group "" at the cluster scope`},
		{"servicecidrs", csr("csr-good", "10.0.0.5", "fd00::5"), nil, "-", "cannot tell whether the approver would approve it: list servicecidrs: " +
			`servicecidrs is forbidden: User "nobody" cannot list resource "servicecidrs" in API group "" at the cluster scope`},
		{"servicecidrs", csr("csr-other", "10.0.0.5", "10.0.0.9"), nil, "kubectl certificate deny csr-other",
			"refused (IPNotPublished): IP 10.0.0.9 is not an address nodeaddr published for Node node-a [10.0.0.5 fd00::5]"},
	} {
		objs := []any{n, tc.csr}
		if tc.approver != nil {
			objs = append(objs, tc.approver)
		}
		kc := kubeconfig(t, startForbidding(t, tc.forbid, objs...).URL)
		stdout, stderr, code := runPlugin("stale", "--kubelet-certs=false", "-o", "json", "--kubeconfig", kc)
		var l struct{ Items []inspect.Finding }
		if err := json.Unmarshal([]byte(stdout), &l); err != nil || code != 1 || len(l.Items) != 1 {
			t.Fatalf("forbidden %q: exit %d, %v, stderr %q\n%s", tc.forbid, code, err, stderr, stdout)
		}
		if f := l.Items[0]; f.Name != tc.csr.Name || f.Fix != tc.fix || !strings.HasSuffix(f.Where, tc.where) {
			t.Errorf("forbidden %q: %+v, want fix %q, where ending %q", tc.forbid, f, tc.fix, tc.where)
		}
	}
}
