package csr

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	certv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/client-go/kubernetes"

	"github.com/nodeaddr/nodeaddr/test/harness"
	"github.com/nodeaddr/nodeaddr/test/harness/celcheck"
)

// The kubelet-serving-csr component (deploy/components/kubelet-serving-csr) and its chart switch,
// config.approveKubeletServingCsr: the central approver, its RBAC and its two policies.
const (
	csrPolicyName        = "nodeaddr-kubelet-serving-csr"
	recordPolicyName     = "nodeaddr-approval-record"
	approverLeasePolicy  = "nodeaddr-approver-lease"
	approverEventsPolicy = "nodeaddr-approver-events"
	approverName         = "nodeaddr-approver"
	recordAnnotation     = "nodeaddr.io/addresses"
)

// componentKeys are the objects the component adds to the base, keyed as harness.DecodeDocs keys them, for
// an install named name (the base's full name) in namespace ns.
func componentKeys(name, ns string) []string {
	return []string{
		"ClusterRole/<nil>/" + name + "-kubelet-serving-csr", "ClusterRoleBinding/<nil>/" + name + "-kubelet-serving-csr",
		"Role/default/" + name + "-kubelet-serving-csr", "RoleBinding/default/" + name + "-kubelet-serving-csr",
		"Role/" + ns + "/" + name + "-approver", "RoleBinding/" + ns + "/" + name + "-approver",
		"Deployment/" + ns + "/" + name + "-approver",
		"ValidatingAdmissionPolicy/<nil>/" + name + "-kubelet-serving-csr", "ValidatingAdmissionPolicyBinding/<nil>/" + name + "-kubelet-serving-csr",
		"ValidatingAdmissionPolicy/<nil>/" + name + "-approval-record", "ValidatingAdmissionPolicyBinding/<nil>/" + name + "-approval-record",
		"ValidatingAdmissionPolicy/<nil>/" + name + "-approver-lease", "ValidatingAdmissionPolicyBinding/<nil>/" + name + "-approver-lease",
		"ValidatingAdmissionPolicy/<nil>/" + name + "-approver-events", "ValidatingAdmissionPolicyBinding/<nil>/" + name + "-approver-events",
	}
}

// at returns the value at path in o (map keys, or list indexes as ints), nil when absent.
func at(o any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := o.(harness.Object)
			if !ok {
				return nil
			}
			o = m[k]
		case int:
			l, ok := o.([]any)
			if !ok || k >= len(l) {
				return nil
			}
			o = l[k]
		}
	}
	return o
}

func stringList(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		out = append(out, fmt.Sprint(x))
	}
	return out
}

// approverContainer is the approver's container in a render.
func approverContainer(t *testing.T, objs map[string]harness.Object, key string) harness.Object {
	t.Helper()
	d, ok := objs[key]
	if !ok {
		t.Fatalf("no %s in the render", key)
	}
	c, ok := at(d, "spec", "template", "spec", "containers", 0).(harness.Object)
	if !ok || c["name"] != "approver" {
		t.Fatalf("%s: no container approver first: %v", key, at(d, "spec", "template", "spec", "containers"))
	}
	return c
}

// checkApproverNamed checks that a render names the approver's ServiceAccount ns/name-approver
// wherever it must: the policy's CEL strings, the bindings' subjects, the Deployment's pod, and
// that the Lease the approver elects on is the one its Role lets it update.
func checkApproverNamed(t *testing.T, what string, objs map[string]harness.Object, name, ns, lease string) {
	t.Helper()
	sa := name + "-approver"
	if _, ok := objs["ServiceAccount/"+ns+"/"+sa]; !ok {
		t.Errorf("%s: no ServiceAccount %s/%s", what, ns, sa)
	}
	user := fmt.Sprintf(`'system:serviceaccount:' + '%s' + ':' + '%s'`, ns, sa)
	for _, policy := range []string{"-kubelet-serving-csr", "-approver-lease", "-approver-events"} {
		p, ok := objs["ValidatingAdmissionPolicy/<nil>/"+name+policy]
		if !ok {
			t.Fatalf("%s: no policy %s%s", what, name, policy)
		}
		for _, e := range []any{at(p, "spec", "matchConditions", 0, "expression"), at(p, "spec", "variables", 0, "expression")} {
			if !strings.Contains(strings.Join(strings.Fields(fmt.Sprint(e)), " "), user) {
				t.Errorf("%s: the policy %s%s's expression does not name %s: %v", what, name, policy, user, e)
			}
		}
	}
	if v := at(objs["ValidatingAdmissionPolicy/<nil>/"+name+"-approver-lease"], "spec", "variables", 1); at(v, "name") != "leaseName" ||
		at(v, "expression") != "'"+lease+"'" {
		t.Errorf("%s: the Lease policy's leaseName is %v, want '%s'", what, v, lease)
	}
	for _, key := range []string{"ClusterRoleBinding/<nil>/" + name + "-kubelet-serving-csr", "RoleBinding/default/" + name + "-kubelet-serving-csr",
		"RoleBinding/" + ns + "/" + sa} {
		b, ok := objs[key]
		if !ok {
			t.Errorf("%s: no %s", what, key)
			continue
		}
		if s, _ := at(b, "subjects", 0).(harness.Object); s["kind"] != "ServiceAccount" || s["namespace"] != ns || s["name"] != sa || len(b["subjects"].([]any)) != 1 {
			t.Errorf("%s: %s subjects %v, want only %s/%s", what, key, b["subjects"], ns, sa)
		}
	}
	d := objs["Deployment/"+ns+"/"+sa]
	if got := at(d, "spec", "template", "spec", "serviceAccountName"); got != sa {
		t.Errorf("%s: the approver's pod runs as %v, want %s", what, got, sa)
	}
	if args := stringList(approverContainer(t, objs, "Deployment/"+ns+"/"+sa)["args"]); !slices.Contains(args, "--leader-election-id="+lease) {
		t.Errorf("%s: approver args %v lack --leader-election-id=%s", what, args, lease)
	}
	role := objs["Role/"+ns+"/"+sa]
	var named []string
	for _, r := range at(role, "rules").([]any) {
		if rn, ok := r.(harness.Object)["resourceNames"]; ok {
			named = append(named, stringList(rn)...)
		}
	}
	if !slices.Equal(named, []string{lease}) {
		t.Errorf("%s: the leader-election Role names the Leases %v, want [%s]", what, named, lease)
	}
}

// checkAgentHasNoCSRRights fails t when a binding of the render gives the agent's ServiceAccount
// ns/sa a role with a rule on certificates.k8s.io (or every group).
func checkAgentHasNoCSRRights(t *testing.T, what string, objs map[string]harness.Object, ns, sa string) {
	t.Helper()
	bindings := 0
	for key, b := range objs {
		kind, bns, _ := strings.Cut(key, "/")
		bns, _, _ = strings.Cut(bns, "/")
		if kind != "ClusterRoleBinding" && kind != "RoleBinding" {
			continue
		}
		agent := false
		for _, s := range b["subjects"].([]any) {
			s := s.(harness.Object)
			agent = agent || s["kind"] == "ServiceAccount" && s["namespace"] == ns && s["name"] == sa
		}
		if !agent {
			continue
		}
		bindings++
		roleKey := "ClusterRole/<nil>/" + fmt.Sprint(at(b, "roleRef", "name"))
		if at(b, "roleRef", "kind") == "Role" {
			roleKey = "Role/" + bns + "/" + fmt.Sprint(at(b, "roleRef", "name"))
		}
		role, ok := objs[roleKey]
		if !ok {
			t.Errorf("%s: %s binds the agent to %s, which the render lacks", what, key, roleKey)
			continue
		}
		for _, r := range role["rules"].([]any) {
			groups, _ := r.(harness.Object)["apiGroups"].([]any)
			if slices.ContainsFunc(stringList(groups), func(g string) bool { return g == "certificates.k8s.io" || g == "*" }) {
				t.Errorf("%s: %s gives the agent %v", what, key, r)
			}
		}
	}
	if bindings < 2 {
		t.Errorf("%s: only %d bindings of the agent %s/%s found", what, bindings, ns, sa)
	}
}

// checkApproverImage checks that the approver runs the agents' image (and pull policy).
func checkApproverImage(t *testing.T, what string, objs map[string]harness.Object, name string) string {
	t.Helper()
	ds, ok := objs["DaemonSet/kube-system/"+name]
	if !ok {
		t.Fatalf("%s: no DaemonSet %s", what, name)
	}
	agent := at(ds, "spec", "template", "spec", "containers", 0).(harness.Object)
	approver := approverContainer(t, objs, "Deployment/kube-system/"+name+"-approver")
	if approver["image"] != agent["image"] || approver["imagePullPolicy"] != agent["imagePullPolicy"] {
		t.Errorf("%s: the approver runs %v (%v), the agents %v (%v)", what, approver["image"], approver["imagePullPolicy"], agent["image"], agent["imagePullPolicy"])
	}
	return fmt.Sprint(approver["image"])
}

// config.approveKubeletServingCsr=true renders what the base with the kubelet-serving-csr component
// renders: the approver's Deployment, its RBAC, both policies with their bindings, and the agents'
// --approval-record=true; the default render has none of them, and the agents hold no CSR right in
// either. The approver runs the agents' image, and follows the release's namespace and name.
func TestHelmKubeletServingCSRMatchesKustomize(t *testing.T) {
	harness.RequireE2E(t)
	rendered := harness.ComponentOverlay(t, "kubelet-serving-csr")
	on := harness.HelmTemplate(t, "--set", "config.approveKubeletServingCsr=true")
	harness.CompareRenders(t, on, rendered)
	objs, off := harness.DecodeDocs(t, on), harness.DecodeDocs(t, harness.HelmTemplate(t))
	kobjs, base := harness.DecodeDocs(t, rendered), harness.DecodeDocs(t, harness.Kustomize(t, harness.DeployFile()))
	for _, key := range componentKeys("nodeaddr", "kube-system") {
		if _, ok := objs[key]; !ok {
			t.Errorf("config.approveKubeletServingCsr=true does not render %s", key)
		}
		if _, ok := off[key]; ok {
			t.Errorf("the default render has %s", key)
		}
		if _, ok := base[key]; ok {
			t.Errorf("the kustomize base has %s", key)
		}
	}
	// The approver's identity is in the base (deploy/wiring reads it) and so in the default render.
	for what, o := range map[string]map[string]harness.Object{"the kustomize base": base, "the default render": off} {
		if _, ok := o["ServiceAccount/kube-system/"+approverName]; !ok {
			t.Errorf("%s lacks ServiceAccount %s", what, approverName)
		}
	}
	for what, o := range map[string]map[string]harness.Object{"kustomize": kobjs, "helm": objs} {
		args := harness.RenderedArgs(t, o)
		if !slices.Contains(args, "--approval-record=true") {
			t.Errorf("%s: agent args lack --approval-record=true: %v", what, args)
		}
		if slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--approve-kubelet-serving-csr") }) {
			t.Errorf("%s: agent args carry the deprecated --approve-kubelet-serving-csr: %v", what, args)
		}
		checkAgentHasNoCSRRights(t, what, o, "kube-system", "nodeaddr")
		checkApproverNamed(t, what, o, "nodeaddr", "kube-system", approverName)
	}
	if args := harness.DefaultArgs(t); !slices.Contains(args, "--approval-record=false") {
		t.Errorf("default args lack --approval-record=false: %v", args)
	}
	if img := checkApproverImage(t, "kustomize", kobjs, "nodeaddr"); img != harness.ReleasedImage(t) {
		t.Errorf("kustomize: the approver runs %s, want %s", img, harness.ReleasedImage(t))
	}
	checkApproverImage(t, "helm", objs, "nodeaddr")
	digest := "sha256:" + strings.Repeat("ab", 32)
	pinned := harness.DecodeDocs(t, harness.HelmTemplate(t, "--set", "config.approveKubeletServingCsr=true", "--set", "image.repository=mirror/nodeaddr",
		"--set", "image.tag=v9.9.9", "--set", "image.digest="+digest, "--set", "image.pullPolicy=Always"))
	if img := checkApproverImage(t, "helm image values", pinned, "nodeaddr"); img != "mirror/nodeaddr:v9.9.9@"+digest {
		t.Errorf("image values: the approver runs %s", img)
	}

	// Another namespace and name: the policy, the bindings, the pod and the Lease follow.
	moved := harness.DecodeDocs(t, harness.HelmTemplate(t, "--set", "config.approveKubeletServingCsr=true", "--set", "fullnameOverride=addr", "--namespace", "infra"))
	for _, key := range componentKeys("addr", "infra") {
		if _, ok := moved[key]; !ok {
			t.Errorf("fullnameOverride=addr -n infra: no %s", key)
		}
	}
	checkApproverNamed(t, "helm fullnameOverride=addr -n infra", moved, "addr", "infra", "addr-approver")
	checkAgentHasNoCSRRights(t, "helm fullnameOverride=addr -n infra", moved, "infra", "addr")
}

// The approver's values render as its flags, which the binary accepts; resources, scheduling and
// the API server endpoint follow their values; the schema refuses what the binary would.
func TestHelmApproverValues(t *testing.T) {
	harness.RequireE2E(t)
	const key = "Deployment/kube-system/nodeaddr-approver"
	objs := harness.DecodeDocs(t, harness.HelmTemplate(t, "--set", "config.approveKubeletServingCsr=true",
		"--set", "approver.replicas=3", "--set", "approver.clusterDomain=corp.local",
		"--set-json", `approver.serviceCIDRs=["10.96.0.0/12","fd00:10:96::/112"]`,
		"--set-json", `approver.allowedDNSSuffixes=["nodes.example.internal"]`,
		"--set-json", `approver.allowedIPPrefixes=["10.0.0.0/8","2001:db8::/32"]`,
		"--set", "approver.logLevel=debug", "--set", "approver.logFormat=text", "--set-json", `approver.extraArgs=["--max-sans=5"]`,
		"--set", "approver.resources.limits.memory=128Mi", "--set", "approver.tolerations=null", "--set", "approver.priorityClassName=",
		"--set", "apiServer.host=10.0.0.10", "--set", "apiServer.port=6443"))
	d := objs[key]
	if r := at(d, "spec", "replicas"); fmt.Sprint(r) != "3" {
		t.Errorf("approver.replicas=3: replicas %v", r)
	}
	c := approverContainer(t, objs, key)
	args := stringList(c["args"])
	want := []string{"approver", "--leader-elect=true", "--leader-election-id=nodeaddr-approver", "--bind-address=:9813",
		"--cluster-domain=corp.local", "--service-cidr=10.96.0.0/12,fd00:10:96::/112", "--allowed-dns-suffixes=nodes.example.internal",
		"--allowed-ip-prefixes=10.0.0.0/8,2001:db8::/32", "--log-level=debug", "--log-format=text", "--max-sans=5"}
	if !slices.Equal(args, want) {
		t.Errorf("approver args\n got %v\nwant %v", args, want)
	}
	env := map[string]any{}
	for _, e := range c["env"].([]any) {
		e := e.(harness.Object)
		env[e["name"].(string)] = e["value"]
		if e["valueFrom"] != nil {
			env[e["name"].(string)] = e["valueFrom"]
		}
	}
	if env["KUBERNETES_SERVICE_HOST"] != "10.0.0.10" || env["KUBERNETES_SERVICE_PORT"] != "6443" || env["GOMEMLIMIT"] == nil ||
		at(env["POD_NAMESPACE"], "fieldRef", "fieldPath") != "metadata.namespace" {
		t.Errorf("approver env %v", env)
	}
	if m := at(c, "resources", "limits", "memory"); m != "128Mi" {
		t.Errorf("approver.resources.limits.memory=128Mi: %v", m)
	}
	pod := at(d, "spec", "template", "spec").(harness.Object)
	for _, k := range []string{"tolerations", "priorityClassName", "hostNetwork"} {
		if _, ok := pod[k]; ok {
			t.Errorf("the approver's pod has %s: %v", k, pod[k])
		}
	}
	checkApproverArgsParse(t, args[1:])
	checkApproverArgsParse(t, stringList(approverContainer(t, harness.DecodeDocs(t, harness.HelmTemplate(t, "--set", "config.approveKubeletServingCsr=true")), key)["args"])[1:])

	for _, c := range []struct{ set, want string }{
		{"approver.replicas=0", "replicas"},
		{"approver.logLevel=verbose", "logLevel"},
		{"approver.allowedIPPrefixes={10.0.0.1}", "allowedIPPrefixes"},
		{"approver.serviceCIDRs={a,b}", "serviceCIDRs"},
		{"approver.maxSans=5", "maxSans"},
	} {
		_, err := harness.HelmTemplateErr(t, "--set", "config.approveKubeletServingCsr=true", "--set", c.set)
		if err == nil || !strings.Contains(err.Error(), "schema") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("--set %s: %v, want the schema to refuse %s", c.set, err, c.want)
		}
	}
}

// checkApproverArgsParse runs `nodeaddr approver ARGS --version`, which parses and checks every
// flag and exits; exit 2 is a usage error.
func checkApproverArgsParse(t *testing.T, args []string) {
	t.Helper()
	bin := harness.MustBuild(t).Nodeaddr
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, append(append([]string{"approver"}, args...), "--version")...).CombinedOutput()
	if err != nil {
		t.Errorf("nodeaddr approver %v --version: %v\n%s", args, err, out)
	}
}

// The component's policies have no parameter, answer 403 for every validation, type-check against
// the schemas of the pinned release, and compile at the 1.29 CEL level a 1.30 API server checks new
// expressions at; each binding binds its namesake.
func TestKubeletServingCSRPolicyChecks(t *testing.T) {
	policies, objs := celcheck.CheckPolicyFile(t, version.MajorMinor(1, 29), "components", "kubelet-serving-csr", "policy.yaml")
	var bindings []string
	for _, o := range objs {
		bindings = append(bindings, o.Spec.PolicyName)
		if o.Name != o.Spec.PolicyName || o.Spec.ParamRef != nil || !slices.Equal(o.Spec.ValidationActions, []admissionv1.ValidationAction{admissionv1.Deny}) {
			t.Errorf("binding %s binds %q with paramRef %v and actions %v, want its namesake, no parameter, Deny", o.Name, o.Spec.PolicyName, o.Spec.ParamRef, o.Spec.ValidationActions)
		}
	}
	want := []string{csrPolicyName, recordPolicyName, approverLeasePolicy, approverEventsPolicy}
	if !slices.Equal(policies, want) || !slices.Equal(bindings, want) {
		t.Fatalf("the component's policies %v and bindings %v, want %v", policies, bindings, want)
	}
}

// The base with the component applies on the API server (server-side dry run, then for real), the
// policies' expressions compile there, and the replacements left the approver's username intact.
func TestKubeletServingCSRComponentApplies(t *testing.T) {
	harness.RequireE2E(t)
	rendered := harness.ComponentOverlay(t, "kubelet-serving-csr")
	cp, _ := harness.ApplyToAPIServer(t, harness.MustBuild(t).Kubectl, rendered, "nodeaddr-overlay")
	ctx := context.Background()
	p, err := cp.Admin.AdmissionregistrationV1().ValidatingAdmissionPolicies().Get(ctx, csrPolicyName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if v := p.Spec.Variables[0]; v.Name != "approverUser" || v.Expression != "'system:serviceaccount:' + 'kube-system' + ':' + 'nodeaddr-approver'" {
		t.Errorf("approverUser after the replacements: %+v", v)
	}
	d, err := cp.Admin.AppsV1().Deployments("kube-system").Get(ctx, approverName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if c := d.Spec.Template.Spec.Containers[0]; c.Image != harness.ReleasedImage(t) || c.Args[0] != "approver" {
		t.Errorf("approver container %s %v", c.Image, c.Args)
	}
}

// untilDenied retries attempt (numbered from 0) until the named policy refuses it, for at most 30 s:
// a policy applied a moment ago may not be enforced yet.
func untilDenied(t *testing.T, policy string, attempt func(i int) error) {
	t.Helper()
	i := 0
	harness.Eventually(t, 30*time.Second, 200*time.Millisecond, policy+" refuses", func() (bool, string) {
		err := attempt(i)
		i++
		return harness.NamesPolicy(err, policy), fmt.Sprint(err)
	})
}

// approverEvent is an Event about node as the approver records it (component nodeaddr-approver,
// no host).
func approverEvent(cp *harness.ControlPlane, t *testing.T, node string) *corev1.Event {
	e := harness.NodeEvent(cp, t, node, "nodeaddr-approver", "KubeletServingCSRApproved")
	e.Source.Host = ""
	return e
}

// fileCSR creates, with cs's identity, a CSR of signer for node's kubelet (SANs node and
// 192.0.2.10) and returns it.
func fileCSR(t *testing.T, cs kubernetes.Interface, name, node, signer string) *certv1.CertificateSigningRequest {
	t.Helper()
	c, err := harness.ServingCSR{Node: node, IPs: []string{"192.0.2.10"}, DNS: []string{node}}.Object(name)
	if err != nil {
		t.Fatal(err)
	}
	if signer != certv1.KubeletServingSignerName {
		c.Spec.SignerName = signer
		c.Spec.Usages = []certv1.KeyUsage{certv1.UsageDigitalSignature, certv1.UsageKeyEncipherment, certv1.UsageClientAuth}
	}
	created, err := cs.CertificatesV1().CertificateSigningRequests().Create(context.Background(), c, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create CSR %s: %v", name, err)
	}
	return created
}

// waitApproverPolicy retries the approver's denial of fresh kubelet CSRs of node until policy
// refuses it (a new policy takes a moment to be enforced), and returns the refusal.
func waitApproverPolicy(t *testing.T, approver, kubelet kubernetes.Interface, node, policy string) error {
	t.Helper()
	var err error
	i := 0
	harness.Eventually(t, 30*time.Second, 200*time.Millisecond, "the approver's denial refused by "+policy, func() (bool, string) {
		c := fileCSR(t, kubelet, fmt.Sprintf("probe-%d", i), node, certv1.KubeletServingSignerName)
		i++
		err = harness.SetCSRCondition(context.Background(), approver, c, certv1.CertificateDenied)
		return harness.NamesPolicy(err, policy), fmt.Sprint(err)
	})
	return err
}

// The approver may add one Approved condition to a pending kubelet-serving CSR of a Node, and
// nothing else: denying, approving a CSR no Node requested or of another signer, deleting are
// refused, by the policy nodeaddr-kubelet-serving-csr or by RBAC. It reads what it decides with and
// elects its leader; the agents have no CSR right; another ServiceAccount bound to the approver's
// ClusterRole is refused every write.
func TestApproverConfinedByPolicy(t *testing.T) {
	harness.RequireE2E(t)
	ctx := context.Background()
	const a = "node-a"
	cp, k := harness.ApplyToAPIServer(t, harness.MustBuild(t).Kubectl, harness.ComponentOverlay(t, "kubelet-serving-csr"), "nodeaddr-overlay")
	cp.CreateNode(t, harness.NodeSpec{Name: a, Addresses: []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: a}}})
	approver := harness.TokenClient(t, cp, harness.PodToken(t, cp, "kube-system", approverName, a))
	kubelet := cp.AsKubelet(t, a)
	if err := waitApproverPolicy(t, approver, kubelet, a, csrPolicyName); !harness.DeniedBy(err, csrPolicyName) {
		t.Errorf("the approver denies a CSR: %v, want a 403 from %s", err, csrPolicyName)
	}

	c := fileCSR(t, kubelet, "a-1", a, certv1.KubeletServingSignerName)
	if err := harness.SetCSRCondition(ctx, approver, c, certv1.CertificateApproved); err != nil {
		t.Errorf("the approver approves node-a's kubelet-serving CSR: %v", err)
	}
	adminCSR := fileCSR(t, cp.Admin, "admin-1", a, certv1.KubeletServingSignerName)
	if err := harness.SetCSRCondition(ctx, approver, adminCSR, certv1.CertificateApproved); !harness.DeniedBy(err, csrPolicyName) ||
		!strings.Contains(err.Error(), "of a Node") {
		t.Errorf("the approver approves a kubelet-serving CSR the administrator filed: %v, want a 403 from %s", err, csrPolicyName)
	}
	client := fileCSR(t, kubelet, "client-1", a, certv1.KubeAPIServerClientKubeletSignerName)
	if err := harness.SetCSRCondition(ctx, approver, client, certv1.CertificateApproved); !apierrors.IsForbidden(err) {
		t.Errorf("the approver approves a kube-apiserver-client-kubelet CSR: %v, want a 403", err)
	}
	if err := approver.CertificatesV1().CertificateSigningRequests().Delete(ctx, "a-1", metav1.DeleteOptions{}); !harness.DeniedByRBAC(err) {
		t.Errorf("the approver deletes a CSR: %v, want RBAC's refusal", err)
	}

	// What it reads and writes besides the approval.
	for what, f := range map[string]func() error{
		"list kubelet-serving CSRs": func() error {
			_, err := approver.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{FieldSelector: "spec.signerName=" + certv1.KubeletServingSignerName})
			return err
		},
		"list Nodes": func() error { _, err := approver.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); return err },
		"list ServiceCIDRs": func() error {
			_, err := approver.NetworkingV1().ServiceCIDRs().List(ctx, metav1.ListOptions{})
			return err
		},
		"list Services in default": func() error {
			_, err := approver.CoreV1().Services("default").List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=kubernetes"})
			return err
		},
		"list EndpointSlices in default": func() error {
			_, err := approver.DiscoveryV1().EndpointSlices("default").List(ctx, metav1.ListOptions{LabelSelector: "kubernetes.io/service-name=kubernetes"})
			return err
		},
		"create an Event about node-a in default": func() error { return harness.CreateEvent(ctx, approver, approverEvent(cp, t, a)) },
		"create an Event about a Node of a 200-character name (the recorder's uid is the name)": func() error {
			e := approverEvent(cp, t, a)
			long := strings.Repeat("n", 200)
			e.GenerateName, e.InvolvedObject.Name, e.InvolvedObject.UID = "long.", long, types.UID(long)
			return harness.CreateEvent(ctx, approver, e)
		},
		"create, get and update its Lease": func() error {
			l, err := approver.CoordinationV1().Leases("kube-system").Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: approverName}}, metav1.CreateOptions{})
			if err != nil {
				return err
			}
			if l, err = approver.CoordinationV1().Leases("kube-system").Get(ctx, approverName, metav1.GetOptions{}); err != nil {
				return err
			}
			holder := "nodeaddr-approver-a"
			l.Spec.HolderIdentity = &holder
			_, err = approver.CoordinationV1().Leases("kube-system").Update(ctx, l, metav1.UpdateOptions{})
			return err
		},
	} {
		if err := f(); err != nil {
			t.Errorf("the approver may %s: %v", what, err)
		}
	}
	// What RBAC cannot name, the policies refuse: another Lease in its namespace (a component whose
	// Lease is absent would never lead again), an Event forged as a kubelet's, or of another reason.
	const b = "node-b"
	cp.CreateNode(t, harness.NodeSpec{Name: b, Addresses: []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: b}}})
	kubeletEvent := harness.NodeEvent(cp, t, b, "kubelet", "NodeNotReady")
	untilDenied(t, approverLeasePolicy, func(i int) error {
		_, err := approver.CoordinationV1().Leases("kube-system").Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("probe-%d", i)}}, metav1.CreateOptions{})
		return err
	})
	untilDenied(t, approverEventsPolicy, func(int) error { return harness.CreateEvent(ctx, approver, kubeletEvent) })
	for what, c := range map[string]struct {
		policy string
		f      func() error
	}{
		"create the Lease kube-controller-manager in its namespace": {approverLeasePolicy, func() error {
			d := int32(2147483647)
			holder := "attacker"
			_, err := approver.CoordinationV1().Leases("kube-system").Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "kube-controller-manager"},
				Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &d}}, metav1.CreateOptions{})
			return err
		}},
		"forge a kubelet's NodeNotReady Event about another Node": {approverEventsPolicy, func() error { return harness.CreateEvent(ctx, approver, kubeletEvent) }},
		"write an Event of another reason as itself": {approverEventsPolicy, func() error {
			e := approverEvent(cp, t, a)
			e.Reason = "NodeNotReady"
			return harness.CreateEvent(ctx, approver, e)
		}},
		"write an Event about a Pod": {approverEventsPolicy, func() error {
			e := approverEvent(cp, t, a)
			e.InvolvedObject = corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: "default", Name: "x"}
			return harness.CreateEvent(ctx, approver, e)
		}},
	} {
		if err := c.f(); !harness.DeniedBy(err, c.policy) {
			t.Errorf("the approver may not %s: %v, want a 403 from %s", what, err, c.policy)
		}
	}
	for what, f := range map[string]func() error{
		"get another Lease": func() error {
			if _, err := cp.Admin.CoordinationV1().Leases("kube-system").Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "kube-scheduler"}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			_, err := approver.CoordinationV1().Leases("kube-system").Get(ctx, "kube-scheduler", metav1.GetOptions{})
			return err
		},
		"create a Lease in default": func() error {
			_, err := approver.CoordinationV1().Leases("default").Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: approverName}}, metav1.CreateOptions{})
			return err
		},
		"patch a Node": func() error { return harness.MergePatch(a, "", `{"metadata":{"labels":{"x":"y"}}}`).Do(ctx, approver) },
		"list Secrets": func() error {
			_, err := approver.CoreV1().Secrets("kube-system").List(ctx, metav1.ListOptions{})
			return err
		},
	} {
		if err := f(); !harness.DeniedByRBAC(err) {
			t.Errorf("the approver may not %s: %v, want RBAC's refusal", what, err)
		}
	}

	// The agents hold no CSR right.
	agent := harness.AgentClient(t, cp, a)
	if _, err := agent.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{}); !harness.DeniedByRBAC(err) {
		t.Errorf("the agent lists CSRs: %v, want RBAC's refusal", err)
	}
	if err := harness.SetCSRCondition(ctx, agent, fileCSR(t, kubelet, "a-2", a, certv1.KubeletServingSignerName), certv1.CertificateApproved); !apierrors.IsForbidden(err) {
		t.Errorf("the agent approves its kubelet's CSR: %v, want a 403", err)
	}

	// Another ServiceAccount bound to the approver's ClusterRole holds its marker: the policy,
	// rendered for nodeaddr-approver, refuses it everything.
	k("", "-n", "kube-system", "create", "serviceaccount", "impostor")
	if _, err := cp.Admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "impostor"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: csrPolicyName},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: "kube-system", Name: "impostor"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	impostor := harness.TokenClient(t, cp, harness.PodToken(t, cp, "kube-system", "impostor", a))
	var err error
	// RBAC's cache takes a moment to see the new binding; the check below reports the last answer.
	_ = harness.Poll(30*time.Second, 200*time.Millisecond, "an answer other than RBAC's denial", func() (bool, string) {
		err = harness.SetCSRCondition(ctx, impostor, fileCSR(t, kubelet, fmt.Sprintf("impostor-%d", time.Now().UnixNano()), a, certv1.KubeletServingSignerName), certv1.CertificateApproved)
		return !harness.DeniedByRBAC(err), fmt.Sprint(err)
	})
	if !harness.DeniedBy(err, csrPolicyName) || !strings.Contains(err.Error(), "rendered for system:serviceaccount:kube-system:nodeaddr-approver") {
		t.Errorf("another holder of the approver's ClusterRole approves: %v, want a 403 from %s naming the approver", err, csrPolicyName)
	}
}

// Only the agents write the approval record: a kubelet (group system:nodes) may neither create,
// change nor remove the annotation nodeaddr.io/addresses, through nodes or nodes/status, nor create
// a Node carrying it; it still writes the rest of its Node. The agent writes its own Node's record;
// an administrator may change it.
func TestApprovalRecordPolicy(t *testing.T) {
	harness.RequireE2E(t)
	ctx := context.Background()
	const a, b = "node-a", "node-b"
	cp, _ := harness.ApplyToAPIServer(t, harness.MustBuild(t).Kubectl, harness.ComponentOverlay(t, "kubelet-serving-csr"), "nodeaddr-overlay")
	for _, n := range []string{a, b} {
		cp.CreateNode(t, harness.NodeSpec{Name: n, Addresses: []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: n}}})
	}
	record := func(node, subresource, value string) harness.NodePatch {
		v := "null"
		if value != "" {
			v = fmt.Sprintf("%q", value)
		}
		return harness.MergePatch(node, subresource, fmt.Sprintf(`{"metadata":{"annotations":{%q:%s}}}`, recordAnnotation, v))
	}
	kubelet := cp.AsKubelet(t, a)
	// Until the policy is enforced a kubelet's record gets through: remove it and retry.
	harness.Eventually(t, 30*time.Second, 200*time.Millisecond, "the kubelet's record refused by "+recordPolicyName, func() (bool, string) {
		err := record(a, "", "192.0.2.66").Do(ctx, kubelet)
		if harness.NamesPolicy(err, recordPolicyName) {
			return true, ""
		}
		if err := record(a, "", "").Do(ctx, cp.Admin); err != nil {
			t.Fatal(err)
		}
		return false, fmt.Sprint(err)
	})
	agent := harness.AgentClient(t, cp, a)
	// The base's own-Node policy, applied in the same breath, may reach the admission chain a
	// moment after the record's: wait for it with another write it denies.
	harness.WaitPolicyEffective(t, agent, harness.MergePatch(b, "status", `{"status":{"addresses":[{"type":"ExternalIP","address":"192.0.2.99"}]}}`))
	if err := record(a, "", "192.0.2.10,2001:db8::10").Do(ctx, agent); err != nil {
		t.Fatalf("the agent records its addresses on its own Node: %v", err)
	}
	if err := record(b, "", "192.0.2.66").Do(ctx, agent); !harness.DeniedBy(err, harness.PolicyName) {
		t.Errorf("the agent of %s records on %s: %v, want a 403 from %s", a, b, err, harness.PolicyName)
	}
	for _, c := range []struct {
		what string
		p    harness.NodePatch
	}{
		{"change its Node's record", record(a, "", "192.0.2.66")},
		{"change it through nodes/status", record(a, "status", "192.0.2.66")},
		{"remove it", record(a, "", "")},
		{"remove it through nodes/status", record(a, "status", "")},
		{"create the record on another Node", record(b, "", "192.0.2.66")},
	} {
		if err := c.p.Do(ctx, kubelet); !harness.DeniedBy(err, recordPolicyName) {
			t.Errorf("a kubelet may not %s: %v, want a 403 from %s", c.what, err, recordPolicyName)
		}
	}
	if got := cp.Node(t, a).Annotations[recordAnnotation]; got != "192.0.2.10,2001:db8::10" {
		t.Errorf("node-a's record is %q, want the agent's", got)
	}
	// A kubelet registering its Node.
	withRecord := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-c", Annotations: map[string]string{recordAnnotation: "192.0.2.30"}}}
	if _, err := cp.AsKubelet(t, "node-c").CoreV1().Nodes().Create(ctx, withRecord, metav1.CreateOptions{}); !harness.DeniedBy(err, recordPolicyName) {
		t.Errorf("a kubelet registers its Node with a record: %v, want a 403 from %s", err, recordPolicyName)
	}
	withRecord.Annotations = map[string]string{"example.com/x": "1"}
	if _, err := cp.AsKubelet(t, "node-c").CoreV1().Nodes().Create(ctx, withRecord, metav1.CreateOptions{}); err != nil {
		t.Errorf("a kubelet registers its Node: %v", err)
	}
	// Everything else a kubelet and an administrator write.
	if err := harness.MergePatch(a, "", `{"metadata":{"annotations":{"example.com/x":"1"}}}`).Do(ctx, kubelet); err != nil {
		t.Errorf("a kubelet annotates its Node: %v", err)
	}
	harness.OtherWritersWork(t, cp, a, "with the approval-record policy")
	if err := record(a, "", "192.0.2.11").Do(ctx, cp.Admin); err != nil {
		t.Errorf("the administrator changes the record: %v", err)
	}
}

// An overlay that moves and renames the install with the component and lists deploy/wiring renders
// the approver's policy and bindings for it, keeps its Role and RoleBinding in default, and lets it
// approve; without the wiring (half-configured) the approver is refused every write, with the
// identity the policy was rendered for.
func TestApproverOverlayIntoAnotherNamespace(t *testing.T) {
	harness.RequireE2E(t)
	ctx := context.Background()
	const a = "node-a"
	for _, c := range []struct {
		name   string
		wiring bool
	}{{"with the wiring", true}, {"half-configured, without it", false}} {
		t.Run(c.name, func(t *testing.T) {
			overlay := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - ../nodeaddr/deploy\n" +
				"components:\n  - ../nodeaddr/deploy/components/kubelet-serving-csr\nnamespace: node-agents\nnamePrefix: site-\n"
			if c.wiring {
				overlay += "transformers:\n  - ../nodeaddr/deploy/wiring\n"
			}
			rendered := harness.RenderKustomization(t, overlay)
			objs := harness.DecodeDocs(t, rendered)
			for _, key := range componentKeys("site-nodeaddr", "node-agents") {
				if !c.wiring && strings.Contains(key, "/default/") {
					key = strings.Replace(key, "/default/", "/node-agents/", 1)
				}
				if objs[key] == nil {
					t.Errorf("overlay lacks %s", key)
				}
			}
			policy := "site-" + csrPolicyName
			if c.wiring {
				// The Lease keeps its name: the Role and the flag name it alike.
				checkApproverNamed(t, "overlay", objs, "site-nodeaddr", "node-agents", approverName)
				checkAgentHasNoCSRRights(t, "overlay", objs, "node-agents", "site-nodeaddr")
			}
			cp := harness.StartControlPlane(t)
			if _, err := cp.Admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "node-agents"}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			cp.CreateNode(t, harness.NodeSpec{Name: a, Addresses: []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: a}}})
			harness.KubectlFor(t, cp)(rendered, "apply", "--server-side", "--field-manager=nodeaddr-install", "-f", "-")
			approver := harness.TokenClient(t, cp, harness.PodToken(t, cp, "node-agents", "site-nodeaddr-approver", a))
			kubelet := cp.AsKubelet(t, a)
			err := waitApproverPolicy(t, approver, kubelet, a, policy)
			approval := harness.SetCSRCondition(ctx, approver, fileCSR(t, kubelet, "a-1", a, certv1.KubeletServingSignerName), certv1.CertificateApproved)
			if c.wiring {
				if !harness.DeniedBy(err, policy) || strings.Contains(err.Error(), "rendered for") {
					t.Errorf("the approver in node-agents denies a CSR: %v, want a 403 from %s", err, policy)
				}
				if approval != nil {
					t.Errorf("the approver in node-agents approves: %v", approval)
				}
				// Its own Lease, under the name its flag and Role give; no other.
				leases := approver.CoordinationV1().Leases("node-agents")
				untilDenied(t, "site-"+approverLeasePolicy, func(i int) error {
					_, err := leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("kube-scheduler-%d", i)}}, metav1.CreateOptions{})
					return err
				})
				if _, err := leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: approverName}}, metav1.CreateOptions{}); err != nil {
					t.Errorf("the approver in node-agents creates its Lease %s: %v", approverName, err)
				}
				// Its own Events in default; no kubelet's.
				untilDenied(t, "site-"+approverEventsPolicy, func(int) error {
					return harness.CreateEvent(ctx, approver, harness.NodeEvent(cp, t, a, "kubelet", "NodeNotReady"))
				})
				if err := harness.CreateEvent(ctx, approver, approverEvent(cp, t, a)); err != nil {
					t.Errorf("the approver in node-agents records its Event about %s: %v", a, err)
				}
				return
			}
			for _, err := range []error{err, approval} {
				if !harness.DeniedBy(err, policy) || !strings.Contains(err.Error(), "rendered for system:serviceaccount:kube-system:nodeaddr-approver") {
					t.Errorf("half-configured: %v, want a 403 from %s naming the identity it was rendered for", err, policy)
				}
			}
		})
	}
}

// Listed after the kubelet-serving-csr component, the api-server-endpoint component points the
// approver at the API server's endpoint too, from the overlay's generated ConfigMap.
func TestApproverFollowsAPIServerEndpoint(t *testing.T) {
	harness.RequireE2E(t)
	dir := t.TempDir()
	rel, err := filepath.Rel(dir, harness.DeployFile())
	if err != nil {
		t.Fatal(err)
	}
	k := fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - %[1]s
components:
  - %[1]s/components/kubelet-serving-csr
  - %[1]s/components/api-server-endpoint
configMapGenerator:
  - name: nodeaddr-api-server
    namespace: kube-system
    literals: [host=10.0.0.10, port=6443]
`, rel)
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		t.Fatal(err)
	}
	objs := harness.DecodeDocs(t, harness.Run(t, "", harness.MustBuild(t).Kubectl, "kustomize", dir))
	c := approverContainer(t, objs, "Deployment/kube-system/"+approverName)
	found := map[string]string{}
	for _, e := range c["env"].([]any) {
		e := e.(harness.Object)
		if ref, ok := at(e, "valueFrom", "configMapKeyRef").(harness.Object); ok {
			found[e["name"].(string)] = fmt.Sprint(ref["name"], "/", ref["key"])
		}
	}
	for name, key := range map[string]string{"KUBERNETES_SERVICE_HOST": "host", "KUBERNETES_SERVICE_PORT": "port"} {
		if v := found[name]; !strings.HasPrefix(v, "nodeaddr-api-server-") || !strings.HasSuffix(v, "/"+key) {
			t.Errorf("the approver's %s comes from %q, want the generated nodeaddr-api-server's %s", name, v, key)
		}
	}
}
