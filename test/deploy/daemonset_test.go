package deploy

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

// The DaemonSet asks for no privilege and for what the agent needs from a node: host network, every
// node, before anything else, probes on the ports the agent binds.
func TestDaemonSetSpec(t *testing.T) {
	ds := harness.ShippedDaemonSet(t)
	pod := ds.Spec.Template.Spec
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(pod.Containers))
	}
	c := pod.Containers[0]
	psc, sc := pod.SecurityContext, c.SecurityContext
	if psc == nil || sc == nil {
		t.Fatal("pod and container securityContext must both be set")
	}
	for _, check := range []struct {
		what string
		ok   bool
	}{
		{"namespace kube-system", ds.Namespace == "kube-system"},
		{"hostNetwork", pod.HostNetwork},
		{"serviceAccountName nodeaddr", pod.ServiceAccountName == "nodeaddr"},
		{"nodeSelector kubernetes.io/os: linux", pod.NodeSelector["kubernetes.io/os"] == "linux" && len(pod.NodeSelector) == 1},
		{"tolerates every taint", slices.ContainsFunc(pod.Tolerations, func(t corev1.Toleration) bool {
			return t.Operator == corev1.TolerationOpExists && t.Key == "" && t.Effect == ""
		})},
		{"priorityClassName system-node-critical", pod.PriorityClassName == "system-node-critical"},
		{"runAsNonRoot", psc.RunAsNonRoot != nil && *psc.RunAsNonRoot},
		{"runAsUser 65532", psc.RunAsUser != nil && *psc.RunAsUser == 65532},
		{"runAsGroup 65532", psc.RunAsGroup != nil && *psc.RunAsGroup == 65532},
		{"seccomp RuntimeDefault", psc.SeccompProfile != nil && psc.SeccompProfile.Type == corev1.SeccompProfileTypeRuntimeDefault},
		{"no privilege escalation", sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation},
		{"not privileged", sc.Privileged == nil || !*sc.Privileged},
		{"readOnlyRootFilesystem", sc.ReadOnlyRootFilesystem != nil && *sc.ReadOnlyRootFilesystem},
		{"capabilities: drop ALL, add none", sc.Capabilities != nil && slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) && len(sc.Capabilities.Add) == 0},
		{"no user override in the container", sc.RunAsUser == nil || *sc.RunAsUser == 65532},
		{"requests cpu 10m", c.Resources.Requests.Cpu().Equal(resource.MustParse("10m"))},
		{"requests memory 32Mi", c.Resources.Requests.Memory().Equal(resource.MustParse("32Mi"))},
		{"limits memory 64Mi", c.Resources.Limits.Memory().Equal(resource.MustParse("64Mi"))},
		{"no cpu limit (throttling would delay reactions)", c.Resources.Limits.Cpu().IsZero()},
		{"rolling update", ds.Spec.UpdateStrategy.RollingUpdate != nil},
	} {
		if !check.ok {
			t.Errorf("DaemonSet: want %s", check.what)
		}
	}
	if ru := ds.Spec.UpdateStrategy.RollingUpdate; ru != nil {
		if ru.MaxSurge == nil || ru.MaxSurge.String() != "0" {
			t.Errorf("maxSurge = %v, want 0 (host ports)", ru.MaxSurge)
		}
		if ru.MaxUnavailable == nil || ru.MaxUnavailable.String() != "10%" {
			t.Errorf("maxUnavailable = %v, want 10%%", ru.MaxUnavailable)
		}
	}
	env := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		env[e.Name] = e
	}
	if e := env["NODE_NAME"]; e.ValueFrom == nil || e.ValueFrom.FieldRef == nil || e.ValueFrom.FieldRef.FieldPath != "spec.nodeName" {
		t.Errorf("NODE_NAME must come from the downward API spec.nodeName: %+v", e)
	}
	if e := env["GOMEMLIMIT"]; e.ValueFrom == nil || e.ValueFrom.ResourceFieldRef == nil ||
		e.ValueFrom.ResourceFieldRef.Resource != "limits.memory" || e.ValueFrom.ResourceFieldRef.ContainerName != c.Name {
		t.Errorf("GOMEMLIMIT must come from this container's limits.memory: %+v", e)
	}
	if !slices.Contains(c.Args, "--node-name=$(NODE_NAME)") {
		t.Errorf("args %v lack --node-name=$(NODE_NAME)", c.Args)
	}
	// The probes and the metrics port are the ports the agent binds.
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	arg := func(flag string) string {
		for _, a := range c.Args {
			if v, ok := strings.CutPrefix(a, "--"+flag+"="); ok {
				return v
			}
		}
		return ""
	}
	if got := arg("metrics-bind-address"); got != fmt.Sprintf(":%d", ports["metrics"]) || ports["metrics"] != 9810 {
		t.Errorf("--metrics-bind-address=%s, metrics port %d: want :9810 and 9810", got, ports["metrics"])
	}
	// Probes on loopback, where the kubelet asks (httpGet.host): a hostNetwork pod's IP is the
	// node's address at pod start and goes stale when the node is renumbered.
	if got := arg("health-probe-bind-address"); got != fmt.Sprintf("127.0.0.1:%d", ports["probes"]) || ports["probes"] != 9811 {
		t.Errorf("--health-probe-bind-address=%s, probes port %d: want 127.0.0.1:9811 and 9811", got, ports["probes"])
	}
	if got := arg("metrics-secure"); got != "" && got != "true" {
		t.Errorf("--metrics-secure=%s: the DaemonSet serves /metrics on every address, it must be secure", got)
	}
	for name, p := range map[string]*corev1.Probe{"liveness": c.LivenessProbe, "readiness": c.ReadinessProbe} {
		want := map[string]string{"liveness": "/healthz", "readiness": "/readyz"}[name]
		// host 127.0.0.1: the pod IP of a hostNetwork pod goes stale on renumbering (test/node).
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != want || p.HTTPGet.Port != intstr.FromString("probes") || p.HTTPGet.Host != "127.0.0.1" {
			t.Errorf("%s probe must be GET %s on 127.0.0.1, port probes: %+v", name, want, p)
		}
		// Without host the kubelet probes the pod IP: for a hostNetwork pod the node's address at
		// pod start, stale after the renumbering nodeaddr exists for.
		if p != nil && p.HTTPGet != nil && p.HTTPGet.Host != "127.0.0.1" {
			t.Errorf("%s probe host = %q, want 127.0.0.1", name, p.HTTPGet.Host)
		}
	}
	checkTokenProjection(t, pod)
}

// checkTokenProjection: no automounted token, but the projected volume the kubelet would mount,
// with a token of at most one hour (3607 s would silently become a year), the cluster CA and the
// namespace, at the standard path.
func checkTokenProjection(t *testing.T, pod corev1.PodSpec) {
	t.Helper()
	if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
		t.Errorf("automountServiceAccountToken must be false")
	}
	var vol *corev1.Volume
	for i := range pod.Volumes {
		if pod.Volumes[i].Name == "kube-api-access" {
			vol = &pod.Volumes[i]
		}
	}
	if vol == nil || vol.Projected == nil || len(vol.Projected.Sources) != 3 {
		t.Fatalf("want a projected volume kube-api-access with three sources: %+v", vol)
	}
	src := vol.Projected.Sources
	if tok := src[0].ServiceAccountToken; tok == nil || tok.Path != "token" || tok.ExpirationSeconds == nil ||
		*tok.ExpirationSeconds != 3600 || tok.Audience != "" {
		t.Errorf("first source must be the ServiceAccount token at token, 3600 s, default audience: %+v", src[0])
	}
	if cm := src[1].ConfigMap; cm == nil || cm.Name != "kube-root-ca.crt" || len(cm.Items) != 1 ||
		cm.Items[0].Key != "ca.crt" || cm.Items[0].Path != "ca.crt" {
		t.Errorf("second source must be kube-root-ca.crt's ca.crt: %+v", src[1])
	}
	if d := src[2].DownwardAPI; d == nil || len(d.Items) != 1 || d.Items[0].Path != "namespace" ||
		d.Items[0].FieldRef == nil || d.Items[0].FieldRef.FieldPath != "metadata.namespace" {
		t.Errorf("third source must be the namespace from the downward API: %+v", src[2])
	}
	c := pod.Containers[0]
	if len(c.VolumeMounts) != 1 || c.VolumeMounts[0].Name != "kube-api-access" ||
		c.VolumeMounts[0].MountPath != "/var/run/secrets/kubernetes.io/serviceaccount" || !c.VolumeMounts[0].ReadOnly {
		t.Errorf("want kube-api-access mounted read-only at /var/run/secrets/kubernetes.io/serviceaccount: %+v", c.VolumeMounts)
	}
}

// The real binary, run with the DaemonSet's args and env as uid 65532 with no capability, in a
// network namespace, with its pod's token and under the admission policy, publishes the Node's
// addresses, removes the taint, answers the DaemonSet's probes and exposes every metric the alerts use.
func TestAgentRunsAsTheDaemonSetDoes(t *testing.T) {
	harness.RequireE2E(t)
	ds := harness.ShippedDaemonSet(t)
	c := ds.Spec.Template.Spec.Containers[0]
	const node, other = "worker-1", "worker-2"
	cp := harness.StartControlPlane(t)
	harness.ApplyRBACAndPolicy(t, cp)
	for _, n := range []string{node, other} {
		cp.CreateNode(t, harness.NodeSpec{Name: n, Taints: []corev1.Taint{harness.Uninitialized, dedicated},
			Addresses: []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: n}}})
	}
	// The agent starts only once the policy is enforced, so its writes really pass through it.
	agentCS := harness.AgentClient(t, cp, node)
	harness.WaitPolicyEffective(t, agentCS, harness.MergePatch(other, "", `{"metadata":{"annotations":{"nodeaddr.io/probe":"1"}}}`))
	// Consumer annotations configured once, in the ConfigMap the agent and the policy share; the
	// agent starts once the policy follows it.
	applyAnnotationsConfig(t, cp, "nodeaddr,k3s,flannel")
	waitAllowed(t, agentCS, harness.MergePatch(node, "", `{"metadata":{"annotations":{"k3s.io/external-ip":"192.0.2.99"}}}`))
	if err := harness.MergePatch(node, "", `{"metadata":{"annotations":{"k3s.io/external-ip":null}}}`).Do(context.Background(), agentCS); err != nil {
		t.Fatal(err)
	}
	cm, err := cp.Admin.CoreV1().ConfigMaps("kube-system").Get(context.Background(), "nodeaddr", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	ns := harness.NewNetns(t, "ds")
	router := harness.NewNetns(t, "rtr")
	harness.DualStackUplink(ns, router)

	env, args := harness.PodEnv(t, c, node, map[string]map[string]string{cm.Name: cm.Data})
	// The test's own probes of the policy above used the agent's token and were refused on
	// purpose: the agent's requests are those from here on.
	started := time.Now()
	a := harness.StartAgent(t, ns, harness.AgentOptions{Args: args, Env: env, Kubeconfig: cp.AgentKubeconfig(t, ns, node)})
	a.UseContainerPorts(c)

	n := cp.WaitNode(t, node, 30*time.Second, "published and untainted", func(n *corev1.Node) bool {
		return len(n.Status.Addresses) == 3 && !slices.Contains(harness.TaintKeys(n), harness.Uninitialized.Key)
	})
	// The defaults manage InternalIP per family; the ExternalIPs equal them and are not published.
	want := "InternalIP=192.0.2.10 InternalIP=2001:db8::10 Hostname=worker-1"
	var got []string
	for _, x := range n.Status.Addresses {
		got = append(got, string(x.Type)+"="+x.Address)
	}
	if strings.Join(got, " ") != want {
		t.Fatalf("addresses = %v, want %s", got, want)
	}
	if keys := strings.Join(harness.TaintKeys(n), ","); keys != "example.com/dedicated,node.kubernetes.io/not-ready" {
		t.Fatalf("taints = %s", keys)
	}
	// On a single-address host the external keys are absent: k3s and flannel then use the internal
	// address, which is the same one (docs/annotations.md).
	for k, v := range map[string]string{
		"nodeaddr.io/internal-ipv4": "192.0.2.10", "nodeaddr.io/internal-ipv6": "2001:db8::10",
		"k3s.io/internal-ip":        "192.0.2.10,2001:db8::10",
		"nodeaddr.io/external-ipv4": "", "nodeaddr.io/external-ipv6": "", "k3s.io/external-ip": "",
		"flannel.alpha.coreos.com/public-ip-overwrite":   "",
		"flannel.alpha.coreos.com/public-ipv6-overwrite": "",
	} {
		if got, ok := n.Annotations[k]; got != v || ok != (v != "") {
			t.Errorf("annotation %s = %q, want %q (annotations %v)", k, n.Annotations[k], v, n.Annotations)
		}
	}
	// The agent's Events passed the events policy. They are sent after the writes they report, by
	// the event broadcaster's goroutine: wait for them.
	if err := harness.Poll(15*time.Second, 200*time.Millisecond, "AddressesUpdated and TaintRemoved Events about "+node, func() (bool, string) {
		u, r := len(cp.Events(t, node, "AddressesUpdated")), len(cp.Events(t, node, "TaintRemoved"))
		return u > 0 && r > 0, fmt.Sprintf("%d AddressesUpdated, %d TaintRemoved", u, r)
	}); err != nil {
		t.Error(err)
	}
	// None of the agent's writes was refused (by RBAC or a policy).
	evs, err := cp.AuditSince(harness.AgentUser, started)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		if e.Stage == "ResponseComplete" && e.ResponseStatus != nil && e.ResponseStatus.Code >= 400 && e.ObjectRef != nil &&
			(e.ObjectRef.Resource == "nodes" && e.ObjectRef.Name == node || e.ObjectRef.Resource == "events") {
			t.Errorf("agent request refused: %s %s: %d", e.Verb, e.RequestURI, e.ResponseStatus.Code)
		}
	}

	// The kubelet's probes, on the DaemonSet's port and paths.
	for _, p := range []*corev1.Probe{c.LivenessProbe, c.ReadinessProbe} {
		a.WaitHTTP(t, a.ProbePort, p.HTTPGet.Path)
	}

	// The process is the DaemonSet's: uid/gid 65532, no capability at all, no new privileges.
	status := procStatus(t, a.Pid())
	for key, want := range map[string]string{
		"Uid": "65532\t65532\t65532\t65532", "Gid": "65532\t65532\t65532\t65532", "Groups": "",
		"CapInh": "0000000000000000", "CapPrm": "0000000000000000", "CapEff": "0000000000000000",
		"CapBnd": "0000000000000000", "CapAmb": "0000000000000000", "NoNewPrivs": "1",
	} {
		if status[key] != want {
			t.Errorf("/proc/%d/status %s = %q, want %q", a.Pid(), key, status[key], want)
		}
	}
	environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", a.Pid()))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(strings.Split(string(environ), "\x00"), "GOMEMLIMIT=67108864") {
		t.Errorf("agent environment lacks GOMEMLIMIT=67108864 (64Mi from limits.memory)")
	}

	// Every metric the alerts use is exposed (up is Prometheus's own), to Prometheus's token over TLS.
	code, body, err := harness.Scrape(ns, fmt.Sprintf("127.0.0.1:%d", a.MetricsPort), harness.ScraperToken(t, cp))
	if err != nil || code != 200 {
		t.Fatalf("/metrics: %d %v", code, err)
	}
	checkGolden(t, body)
	for _, name := range harness.BaseRuleMetrics(t) {
		if !strings.Contains(body, "\n# TYPE "+name+" ") {
			t.Errorf("alerts use %s, which /metrics does not expose", name)
		}
	}
	if m := harness.ParseMetrics(body); m["go_gc_gomemlimit_bytes"] != 0 && m["go_gc_gomemlimit_bytes"] != 64<<20 {
		t.Errorf("go_gc_gomemlimit_bytes = %v, want %d", m["go_gc_gomemlimit_bytes"], 64<<20)
	}
}

// procStatus reads /proc/PID/status of the agent once the exec chain (ip netns exec → setpriv →
// nodeaddr, one pid) has reached nodeaddr.
func procStatus(t *testing.T, pid int) map[string]string {
	t.Helper()
	var out map[string]string
	harness.Eventually(t, 10*time.Second, 20*time.Millisecond, fmt.Sprintf("pid %d is nodeaddr", pid), func() (bool, string) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			t.Fatal(err)
		}
		out = map[string]string{}
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok {
				out[k] = strings.TrimSpace(v)
			}
		}
		// comm: the binary's name, at most 15 bytes
		return strings.HasPrefix(out["Name"], "nodeaddr"), fmt.Sprintf("Name %q", out["Name"])
	})
	return out
}
