package monitoring

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

// The kube-prometheus-stack install the test stands for: release kps in monitoring. A release
// name other than kube-prometheus-stack, so that the scraper nodeaddr allows must come from the
// one value (the shipped list names only the default release's).
const (
	stackRelease   = "kps"
	stackNamespace = "monitoring"
	// The stack's fullname for that release, and its Prometheus resource and ServiceAccount.
	stackFullname = "kps-kube-prometheus-stack"
	promName      = stackFullname + "-prometheus"
	promSA        = stackFullname + "-prometheus"

	node   = "worker-1"
	nodeIP = "192.0.2.10"
)

// The Prometheus Operator, built from its Go module, runs on a real kube-apiserver with its CRDs and
// a Prometheus resource as kube-prometheus-stack's chart renders it for release kps (selectors
// `release: kps`, its ServiceAccount, and the token volume of docs/kube-prometheus-stack.md read
// from the page). nodeaddr's chart without the value: the operator selects none of nodeaddr's
// objects. With monitoring.kubePrometheusStack.release=kps: the configuration it generates holds
// nodeaddr's scrape job and its rule ConfigMap nodeaddr's alerts. Then Debian's Prometheus runs that
// configuration inside the network namespace of a real agent, in a mount namespace laid out as the
// operator's StatefulSet lays out Prometheus's pod; it scrapes the agent (up is 1, nodeaddr_
// metrics stored, which the agent serves only to an allowed token for the audience nodeaddr), loads
// and evaluates every alert, and none is pending or firing.
//
// The one rewrite of the configuration: Debian builds Prometheus without Kubernetes discovery, so
// each job's kubernetes_sd_configs becomes an http_sd_configs asking test/cmd/kubesd, which runs
// Prometheus's own discovery/kubernetes on those same kubernetes_sd_configs, in the same pod
// (withHTTPSD). Relabelings, scheme, TLS, token file, intervals and rule files are the operator's.
//
// What stands in for a cluster: the Pod of the DaemonSet on the node (created from the rendered
// template, its status set as the kubelet would) and the Endpoints and EndpointSlice of the
// Service (written as the endpoint controllers would); for Prometheus's pod, the in-cluster
// credentials of its ServiceAccount (KUBERNETES_SERVICE_HOST/PORT, token, ca.crt, reached through
// the namespace's loopback relay to the API server), the projected token of the page's block, the
// rule ConfigMap's files, and the config-reloader's gunzip and $(POD_NAME) expansion of the Secret.
func TestKubePrometheusStackEndToEnd(t *testing.T) {
	harness.RequireE2E(t)
	prometheus := harness.Tool(t, "prometheus", "prometheus")
	harness.Tool(t, "unshare", "util-linux")
	snippet, block := readTokenSnippet(t)
	t.Logf("the values block of docs/kube-prometheus-stack.md:\n%s", block)
	if got := stackScraper(stackNamespace, stackRelease); got != "system:serviceaccount:"+stackNamespace+":"+promSA {
		t.Fatalf("the stack names release %s's Prometheus ServiceAccount %s, the test %s", stackRelease, got, promSA)
	}
	operator := harness.MustBuildPrometheusOperator(t)
	kubesd := harness.MustBuildKubeSD(t)
	bins := harness.MustBuild(t)
	ctx := context.Background()

	cp := harness.StartControlPlane(t)
	kc := harness.Kubeconfig(t, t.TempDir(), cp.Config.Host, cp.AdminToken)
	kubectl := func(stdin string, args ...string) string {
		t.Helper()
		return harness.Run(t, stdin, bins.Kubectl, append([]string{"--kubeconfig=" + kc}, args...)...)
	}

	// The operator's CRDs, from the module it is built from.
	modDir, err := harness.PrometheusOperatorDir()
	if err != nil {
		t.Fatal(err)
	}
	crds, err := filepath.Glob(filepath.Join(modDir, "example", "prometheus-operator-crd", "*.yaml"))
	if err != nil || len(crds) == 0 {
		t.Fatalf("the operator's CRDs: %v %v", crds, err)
	}
	args := []string{"apply", "--server-side"}
	for _, f := range crds {
		args = append(args, "-f", f)
	}
	kubectl("", args...)
	kubectl("", "wait", "--for=condition=Established", "--timeout=60s", "crd", "--all")

	// The stack's side: its namespace, Prometheus ServiceAccount and ClusterRole (the stack's
	// templates/prometheus/clusterrole.yaml), and the Prometheus resource of its chart.
	stackSide(t, cp)
	promCR := prometheusResource(t, snippet)
	kubectl(string(promCR), "apply", "--server-side", "--field-manager=helm", "-f", "-")

	// nodeaddr's chart without the value (monitoring on, as before it existed). Scrape and rule
	// evaluation every 5 s instead of 30 s, so that the test waits seconds, not minutes.
	fast := []string{"--set", "monitoring.serviceMonitor.interval=5s", "--set", "monitoring.serviceMonitor.scrapeTimeout=4s"}
	kubectl(helmTemplate(t, append([]string{"--set", "monitoring.enabled=true"}, fast...)...),
		"apply", "--server-side", "--field-manager=helm", "-f", "-")

	startOperator(t, operator, kc)
	before := generatedConfig(t, cp, "", 90*time.Second)
	if strings.Contains(before, "serviceMonitor/kube-system/nodeaddr") {
		t.Fatalf("without the value the operator selected nodeaddr's ServiceMonitor:\n%s", before)
	}
	if rules := ruleFiles(t, cp); strings.Contains(fmt.Sprint(rules), "NodeaddrDown") {
		t.Fatalf("without the value the operator selected nodeaddr's PrometheusRule: %v", slices.Collect(mapKeys(rules)))
	}
	t.Logf("without monitoring.kubePrometheusStack.release the operator selects none of nodeaddr's objects")

	// With the one value.
	kubectl(helmTemplate(t, append([]string{"--set", "monitoring.kubePrometheusStack.release=" + stackRelease}, fast...)...),
		"apply", "--server-side", "--field-manager=helm", "-f", "-")
	config := generatedConfig(t, cp, "job_name: serviceMonitor/kube-system/nodeaddr/0", 90*time.Second)
	var rules map[string]string
	harness.Eventually(t, 60*time.Second, time.Second, "nodeaddr's alerts in the operator's rule ConfigMap", func() (bool, string) {
		rules = ruleFiles(t, cp)
		return strings.Contains(fmt.Sprint(rules), "alert: NodeaddrDown"), fmt.Sprint(slices.Collect(mapKeys(rules)))
	})
	t.Logf("with monitoring.kubePrometheusStack.release=%s the operator selects nodeaddr's ServiceMonitor and PrometheusRule (rule files %v)",
		stackRelease, slices.Collect(mapKeys(rules)))

	sts := waitStatefulSet(t, cp)
	pod := prometheusPod(t, sts, snippet)
	// The ServiceMonitor's token file is the one the page's block mounts.
	if !strings.Contains(config, "bearer_token_file: "+pod.tokenFile+"\n") {
		t.Errorf("the generated configuration does not read the token from %s, where docs/kube-prometheus-stack.md mounts it", pod.tokenFile)
	}

	// The agent's pod on worker-1, its Endpoints, and the agent itself, allowing the scrapers the
	// chart's ConfigMap lists.
	cm, err := cp.Admin.CoreV1().ConfigMaps("kube-system").Get(ctx, "nodeaddr", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	allowed := cm.Data["metrics-allowed-scrapers"]
	if !slices.Contains(strings.Split(allowed, ","), "system:serviceaccount:"+stackNamespace+":"+promSA) {
		t.Fatalf("the chart's metrics-allowed-scrapers %q lacks the stack's Prometheus %s/%s", allowed, stackNamespace, promSA)
	}
	cp.CreateNode(t, harness.NodeSpec{Name: node, Taints: []corev1.Taint{harness.Uninitialized},
		Addresses: []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: node}}})
	agentPodAndEndpoints(t, cp)
	h := harness.NewHostOn(t, cp, node)
	h.Uplink("eth0", nodeIP+"/24", "192.0.2.1", 100)
	h.Start("--internal-ip-target=192.0.2.1", "--metrics-secure=true", "--metrics-bind-address=:9810",
		"--metrics-allowed-scrapers="+allowed, "--metrics-token-audience=nodeaddr")

	// Prometheus, in the node's namespace, with the generated configuration.
	base := runPrometheus(t, cp, h.NS, prometheus, kubesd, pod, config, rules)
	q := func(query string) []json.RawMessage {
		t.Helper()
		var r struct {
			Status string
			Data   struct{ Result []json.RawMessage }
		}
		getJSON(t, h.NS, base+"/api/v1/query?"+url.Values{"query": {query}}.Encode(), &r)
		return r.Data.Result
	}
	if err := harness.Poll(90*time.Second, time.Second, "Prometheus scrapes the agent successfully", func() (bool, string) {
		return len(q(`up{job="nodeaddr", node="`+node+`", namespace="kube-system"} == 1`)) > 0, "no up == 1"
	}); err != nil {
		var targets any
		getJSON(t, h.NS, base+"/api/v1/targets", &targets)
		t.Fatalf("%v; targets: %v\nlog:\n%s", err, targets, pod.log())
	}
	firstUp := time.Now()
	var targets struct {
		Data struct {
			ActiveTargets []struct {
				ScrapePool, ScrapeURL, Health, LastError string
				Labels                                   map[string]string
			}
		}
	}
	getJSON(t, h.NS, base+"/api/v1/targets", &targets)
	found := false
	for _, tg := range targets.Data.ActiveTargets {
		t.Logf("target %s %s: %s %s %v", tg.ScrapePool, tg.ScrapeURL, tg.Health, tg.LastError, tg.Labels)
		if tg.ScrapePool == "serviceMonitor/kube-system/nodeaddr/0" && tg.ScrapeURL == "https://"+nodeIP+":9810/metrics" && tg.Health == "up" {
			found = true
		}
	}
	if !found {
		t.Errorf("no healthy target https://%s:9810/metrics in the pool serviceMonitor/kube-system/nodeaddr/0", nodeIP)
	}
	if len(q(`nodeaddr_build_info{job="nodeaddr", node="`+node+`"}`)) == 0 || len(q(`{__name__=~"nodeaddr_.+", job="nodeaddr"}`)) < 5 {
		t.Errorf("Prometheus stored no nodeaddr_ metrics of the agent")
	}

	// The rules of the operator's ConfigMap are loaded and evaluated after the first successful
	// scrape; no alert is pending or firing.
	want := alertNames(t, rules)
	var loaded []string
	harness.Eventually(t, 60*time.Second, time.Second, "the nodeaddr rule group evaluated after the first scrape", func() (bool, string) {
		var evaluated time.Time
		loaded, evaluated = loadedRules(t, h.NS, base)
		return evaluated.After(firstUp.Add(time.Second)), fmt.Sprintf("loaded %v, last evaluation %s", loaded, evaluated)
	})
	slices.Sort(loaded)
	if !slices.Equal(loaded, want) {
		t.Errorf("Prometheus loaded the alerts %v, the operator's rule file holds %v", loaded, want)
	}
	var alerts struct {
		Data struct {
			Alerts []struct {
				State  string
				Labels map[string]string
			}
		}
	}
	getJSON(t, h.NS, base+"/api/v1/alerts", &alerts)
	for _, a := range alerts.Data.Alerts {
		t.Errorf("alert %s is %s: %v", a.Labels["alertname"], a.State, a.Labels)
	}
	t.Logf("Prometheus %s scraped the agent with the operator's configuration; %d alerts loaded, none pending or firing", prometheus, len(want))
}

// stackSide creates what kube-prometheus-stack's chart creates for its Prometheus: the namespace,
// the ServiceAccount and its ClusterRole (the stack's templates/prometheus/clusterrole.yaml) and
// binding.
func stackSide(t *testing.T, cp *harness.ControlPlane) {
	t.Helper()
	ctx := context.Background()
	if _, err := cp.Admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: stackNamespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	if _, err := cp.Admin.CoreV1().ServiceAccounts(stackNamespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: promSA}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	read := []string{"get", "list", "watch"}
	if _, err := cp.Admin.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: promSA},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"nodes", "nodes/metrics", "services", "endpoints", "pods"}, Verbs: read},
			{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: read},
			{APIGroups: []string{"networking.k8s.io"}, Resources: []string{"ingresses"}, Verbs: read},
			{NonResourceURLs: []string{"/metrics", "/metrics/cadvisor"}, Verbs: []string{"get"}},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cp.Admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: promSA},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: promSA},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: promSA, Namespace: stackNamespace}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// prometheusVersion is Debian's Prometheus's version ("v2.42.0"): the Prometheus resource's
// spec.version, so that the operator generates a configuration for the binary that runs it.
func prometheusVersion(t *testing.T) string {
	t.Helper()
	out, err := exec.Command(harness.Tool(t, "prometheus", "prometheus"), "--version").CombinedOutput()
	m := regexp.MustCompile(`version (\d+\.\d+\.\d+)`).FindSubmatch(out)
	if err != nil || m == nil {
		t.Fatalf("prometheus --version: %v\n%s", err, out)
	}
	return "v" + string(m[1])
}

// prometheusResource is the Prometheus resource kube-prometheus-stack's chart renders
// (templates/prometheus/prometheus.yaml) for release kps with its default selectors
// (*SelectorNilUsesHelmValues: true), plus the values block of docs/kube-prometheus-stack.md, and
// evaluation every 5 s; spec.version is Debian's Prometheus's.
func prometheusResource(t *testing.T, s tokenSnippet) []byte {
	t.Helper()
	sel := map[string]any{"matchLabels": map[string]string{"release": stackRelease}}
	p := map[string]any{
		"apiVersion": "monitoring.coreos.com/v1",
		"kind":       "Prometheus",
		"metadata": map[string]any{
			"name": promName, "namespace": stackNamespace,
			"labels": map[string]string{"app": "kube-prometheus-stack-prometheus", "release": stackRelease},
		},
		"spec": map[string]any{
			"version":                         prometheusVersion(t),
			"replicas":                        1,
			"serviceAccountName":              promSA,
			"externalUrl":                     fmt.Sprintf("http://%s.%s:9090", promName, stackNamespace),
			"portName":                        "http-web",
			"evaluationInterval":              "5s",
			"retention":                       "10d",
			"serviceMonitorSelector":          sel,
			"serviceMonitorNamespaceSelector": map[string]any{},
			"podMonitorSelector":              sel,
			"podMonitorNamespaceSelector":     map[string]any{},
			"probeSelector":                   sel,
			"probeNamespaceSelector":          map[string]any{},
			"ruleSelector":                    sel,
			"ruleNamespaceSelector":           map[string]any{},
			"volumes":                         s.Prometheus.PrometheusSpec.Volumes,
			"volumeMounts":                    s.Prometheus.PrometheusSpec.VolumeMounts,
		},
	}
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// startOperator runs the operator against the API server with an administrator's kubeconfig, its
// web listener on a free loopback port; it is stopped when t ends.
func startOperator(t *testing.T, bin, kubeconfig string) {
	t.Helper()
	port, err := harness.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	logFile := filepath.Join(t.TempDir(), "operator.log")
	f, err := os.Create(logFile)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, fmt.Sprintf("--web.listen-address=127.0.0.1:%d", port), "--log-level=info")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		f.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logFile)
			t.Logf("operator log:\n%s", tail(string(b), 60))
		}
	})
}

func tail(s string, n int) string {
	l := strings.Split(s, "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}

// generatedConfig waits until the operator's configuration Secret prometheus-<name> holds a
// prometheus.yaml.gz containing want ("" for any) and returns it decompressed.
func generatedConfig(t *testing.T, cp *harness.ControlPlane, want string, timeout time.Duration) string {
	t.Helper()
	var last string
	harness.Eventually(t, timeout, time.Second, fmt.Sprintf("the operator's Secret prometheus-%s has a configuration containing %q", promName, want), func() (bool, string) {
		s, err := cp.Admin.CoreV1().Secrets(stackNamespace).Get(context.Background(), "prometheus-"+promName, metav1.GetOptions{})
		if err != nil || len(s.Data["prometheus.yaml.gz"]) == 0 {
			return false, fmt.Sprintf("(%v):\n%s", err, last)
		}
		zr, err := gzip.NewReader(bytes.NewReader(s.Data["prometheus.yaml.gz"]))
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(zr)
		if err != nil {
			t.Fatal(err)
		}
		last = string(b)
		return strings.Contains(last, want), "\n" + last
	})
	return last
}

// ruleFiles returns the files of the operator's rule ConfigMaps prometheus-<name>-rulefiles-N.
func ruleFiles(t *testing.T, cp *harness.ControlPlane) map[string]string {
	t.Helper()
	out := map[string]string{}
	l, err := cp.Admin.CoreV1().ConfigMaps(stackNamespace).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, cm := range l.Items {
		if strings.HasPrefix(cm.Name, "prometheus-"+promName+"-rulefiles-") {
			for k, v := range cm.Data {
				out[cm.Name+"/"+k] = v
			}
		}
	}
	return out
}

func mapKeys(m map[string]string) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// waitStatefulSet waits for the operator's StatefulSet prometheus-<name>.
func waitStatefulSet(t *testing.T, cp *harness.ControlPlane) *appsv1.StatefulSet {
	t.Helper()
	var sts *appsv1.StatefulSet
	harness.Eventually(t, 60*time.Second, time.Second, "StatefulSet prometheus-"+promName, func() (bool, string) {
		var err error
		sts, err = cp.Admin.AppsV1().StatefulSets(stackNamespace).Get(context.Background(), "prometheus-"+promName, metav1.GetOptions{})
		return err == nil, fmt.Sprint(err)
	})
	return sts
}

// promPod is what Prometheus's pod holds, as the operator's StatefulSet lays it out.
type promPod struct {
	configFile  string            // the prometheus container's --config.file
	podName     string            // the StatefulSet's first pod
	reloaderEnv map[string]string // the config-reloader's environment ($(VAR) expansion)
	rulesDirs   map[string]string // rule ConfigMap name -> mount path
	tokenFile   string            // the projected token of the page's block
	audience    string
	expiration  int64
	logFile     string
}

func (p *promPod) log() string {
	b, _ := os.ReadFile(p.logFile)
	return tail(string(b), 60)
}

// prometheusPod reads the operator's StatefulSet: the prometheus container's --config.file and
// mounts (the rule ConfigMaps, and the token volume of the page's block, which must be there
// unchanged), and the config-reloader's environment.
func prometheusPod(t *testing.T, sts *appsv1.StatefulSet, s tokenSnippet) *promPod {
	t.Helper()
	p := &promPod{podName: sts.Name + "-0", reloaderEnv: map[string]string{}, rulesDirs: map[string]string{}}
	volumes := map[string]corev1.Volume{}
	for _, v := range sts.Spec.Template.Spec.Volumes {
		volumes[v.Name] = v
	}
	if sa := sts.Spec.Template.Spec.ServiceAccountName; sa != promSA {
		t.Errorf("the StatefulSet's pods run as %q, want %s", sa, promSA)
	}
	var prom *corev1.Container
	for i, c := range sts.Spec.Template.Spec.Containers {
		switch c.Name {
		case "prometheus":
			prom = &sts.Spec.Template.Spec.Containers[i]
		case "config-reloader":
			for _, e := range c.Env {
				switch {
				case e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name":
					p.reloaderEnv[e.Name] = p.podName
				case e.ValueFrom == nil:
					p.reloaderEnv[e.Name] = e.Value
				}
			}
		}
	}
	if prom == nil {
		t.Fatalf("the StatefulSet has no prometheus container")
	}
	for _, a := range prom.Args {
		if v, ok := strings.CutPrefix(a, "--config.file="); ok {
			p.configFile = v
		}
	}
	if p.configFile == "" {
		t.Fatalf("the prometheus container has no --config.file: %v", prom.Args)
	}
	// The page's token volume, as the operator passed it on.
	want := s.Prometheus.PrometheusSpec.VolumeMounts[0]
	for _, m := range prom.VolumeMounts {
		v := volumes[m.Name]
		switch {
		case v.ConfigMap != nil && strings.HasPrefix(v.ConfigMap.Name, "prometheus-"+promName+"-rulefiles-"):
			p.rulesDirs[v.ConfigMap.Name] = m.MountPath
		case m.Name == want["name"] && v.Projected != nil:
			for _, src := range v.Projected.Sources {
				if src.ServiceAccountToken != nil {
					p.tokenFile = path.Join(m.MountPath, src.ServiceAccountToken.Path)
					p.audience = src.ServiceAccountToken.Audience
					p.expiration = ptr.Deref(src.ServiceAccountToken.ExpirationSeconds, 3600)
				}
			}
		}
	}
	if p.tokenFile == "" || p.audience == "" {
		t.Fatalf("the StatefulSet's prometheus container does not mount the projected token of docs/kube-prometheus-stack.md (%v)", prom.VolumeMounts)
	}
	if len(p.rulesDirs) == 0 {
		t.Fatalf("the prometheus container mounts no rule ConfigMap: %v", prom.VolumeMounts)
	}
	t.Logf("Prometheus's pod: config %s, token %s (audience %s), rules %v, reloader env %v", p.configFile, p.tokenFile, p.audience, p.rulesDirs, p.reloaderEnv)
	return p
}

// agentPodAndEndpoints creates the DaemonSet's pod on the node from the applied DaemonSet's template
// (as the DaemonSet controller would), sets its status as the kubelet would for a hostNetwork pod
// (the node's address, Running, Ready), and writes the Service's Endpoints and EndpointSlice as the
// endpoint controllers would.
func agentPodAndEndpoints(t *testing.T, cp *harness.ControlPlane) {
	t.Helper()
	ctx := context.Background()
	ds, err := cp.Admin.AppsV1().DaemonSets("kube-system").Get(ctx, "nodeaddr", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := cp.Admin.CoreV1().Services("kube-system").Get(ctx, "nodeaddr", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "nodeaddr-" + node, Namespace: "kube-system", Labels: ds.Spec.Template.Labels},
		Spec:       *ds.Spec.Template.Spec.DeepCopy(),
	}
	pod.Spec.NodeName = node
	var created *corev1.Pod
	harness.Eventually(t, 10*time.Second, 100*time.Millisecond, "create the agent's pod", func() (bool, string) {
		created, err = cp.Admin.CoreV1().Pods("kube-system").Create(ctx, pod, metav1.CreateOptions{})
		return err == nil, fmt.Sprint(err)
	})
	now := metav1.Now()
	created.Status = corev1.PodStatus{
		Phase: corev1.PodRunning, HostIP: nodeIP, PodIP: nodeIP,
		HostIPs: []corev1.HostIP{{IP: nodeIP}}, PodIPs: []corev1.PodIP{{IP: nodeIP}},
		StartTime: &now,
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: now}},
	}
	if created, err = cp.Admin.CoreV1().Pods("kube-system").UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The Service's port and the pod's container port it targets by name.
	if len(svc.Spec.Ports) != 1 {
		t.Fatalf("Service nodeaddr has %d ports", len(svc.Spec.Ports))
	}
	sp := svc.Spec.Ports[0]
	var port int32
	for _, c := range created.Spec.Containers {
		for _, cport := range c.Ports {
			if cport.Name == sp.TargetPort.StrVal {
				port = cport.ContainerPort
			}
		}
	}
	if port == 0 {
		t.Fatalf("the pod has no container port %q", sp.TargetPort.StrVal)
	}
	ref := &corev1.ObjectReference{Kind: "Pod", Namespace: "kube-system", Name: created.Name, UID: created.UID}
	nodeName := node
	if _, err := cp.Admin.CoreV1().Endpoints("kube-system").Create(ctx, &corev1.Endpoints{
		ObjectMeta: metav1.ObjectMeta{Name: svc.Name, Namespace: "kube-system", Labels: svc.Labels},
		Subsets: []corev1.EndpointSubset{{
			Addresses: []corev1.EndpointAddress{{IP: nodeIP, NodeName: &nodeName, TargetRef: ref}},
			Ports:     []corev1.EndpointPort{{Name: sp.Name, Port: port, Protocol: corev1.ProtocolTCP}},
		}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	sliceLabels := map[string]string{discoveryv1.LabelServiceName: svc.Name, discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io"}
	for k, v := range svc.Labels {
		sliceLabels[k] = v
	}
	if _, err := cp.Admin.DiscoveryV1().EndpointSlices("kube-system").Create(ctx, &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: svc.Name + "-x1", Namespace: "kube-system", Labels: sliceLabels},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{nodeIP}, NodeName: &nodeName, TargetRef: ref,
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(true), Terminating: ptr.To(false)}}},
		Ports: []discoveryv1.EndpointPort{{Name: ptr.To(sp.Name), Port: ptr.To(port), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// reloaderVar is what the config-reloader expands in the configuration: $(NAME).
var reloaderVar = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// runPrometheus runs Debian's Prometheus inside ns (the node's network namespace, where the agent
// listens on the node's address and 127.0.0.1:<API port> relays to the API server) and in a mount
// namespace of its own, where tmpfs mounts over /run and /etc/prometheus hold what the pod would:
// the in-cluster credentials of its ServiceAccount, the projected token, the rule files at the
// StatefulSet's mount paths, and the configuration at --config.file as the config-reloader writes
// it (the Secret gunzipped, $(VAR) expanded from the reloader's environment; nothing else
// changed). It returns Prometheus's base URL inside ns.
func runPrometheus(t *testing.T, cp *harness.ControlPlane, ns *harness.Netns, bin, kubesd string, p *promPod, config string, rules map[string]string) string {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	p.logFile = filepath.Join(dir, "prometheus.log")
	files := map[string][]byte{} // path in Prometheus's mount namespace -> content

	expanded := reloaderVar.ReplaceAllStringFunc(config, func(m string) string {
		name := reloaderVar.FindStringSubmatch(m)[1]
		v, ok := p.reloaderEnv[name]
		if !ok {
			t.Errorf("the configuration uses $(%s), which the config-reloader's environment lacks", name)
		}
		return v
	})
	files[p.configFile] = []byte(expanded)
	// Debian's Prometheus is built without Kubernetes discovery (its configuration parser refuses
	// kubernetes_sd_configs): each job's kubernetes_sd_configs becomes an http_sd_configs that
	// asks kubesd, which runs Prometheus's own Kubernetes discovery on the same
	// kubernetes_sd_configs with the pod's credentials. Nothing else of the configuration changes.
	debianConfig := filepath.Join(path.Dir(p.configFile), "prometheus.debian.yaml")
	files[debianConfig] = withHTTPSD(t, expanded, "127.0.0.1:9091")
	for key, content := range rules {
		cm, file, _ := strings.Cut(key, "/")
		mount, ok := p.rulesDirs[cm]
		if !ok {
			t.Fatalf("the StatefulSet does not mount the rule ConfigMap %s", cm)
		}
		files[path.Join(mount, file)] = []byte(content)
	}
	token := func(audiences []string, exp int64) []byte {
		tr, err := cp.Admin.CoreV1().ServiceAccounts(stackNamespace).CreateToken(ctx, promSA, &authnv1.TokenRequest{
			Spec: authnv1.TokenRequestSpec{Audiences: audiences, ExpirationSeconds: &exp}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return []byte(tr.Status.Token)
	}
	files[p.tokenFile] = token([]string{p.audience}, p.expiration)
	ca, err := os.ReadFile(cp.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	sa := "/var/run/secrets/kubernetes.io/serviceaccount/"
	files[sa+"token"] = token(nil, 3600)
	files[sa+"ca.crt"] = ca
	files[sa+"namespace"] = []byte(stackNamespace)

	// The files, staged on the host and copied in by the script.
	var script strings.Builder
	script.WriteString("set -e\nmount -t tmpfs nodeaddr-test /run\nmount -t tmpfs nodeaddr-test /etc/prometheus\n")
	i := 0
	for dst, content := range files {
		if !strings.HasPrefix(dst, "/var/run/") && !strings.HasPrefix(dst, "/run/") && !strings.HasPrefix(dst, "/etc/prometheus/") {
			t.Fatalf("%s: the test lays out only /run and /etc/prometheus", dst)
		}
		src := filepath.Join(dir, fmt.Sprintf("file-%d", i))
		i++
		if err := os.WriteFile(src, content, 0o600); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&script, "mkdir -p '%s'\ncp '%s' '%s'\n", path.Dir(dst), src, dst)
	}
	listen := "127.0.0.1:9090"
	// kubesd dies with Prometheus (the shell's pid, which becomes Prometheus's).
	fmt.Fprintf(&script, "setpriv --pdeathsig KILL '%s' --config.file='%s' --listen=127.0.0.1:9091 &\n", kubesd, p.configFile)
	fmt.Fprintf(&script, "exec '%s' --config.file='%s' --storage.tsdb.path='%s' --web.listen-address=%s --log.level=debug\n",
		bin, debianConfig, filepath.Join(dir, "data"), listen)
	t.Logf("the configuration the operator generated, as the config-reloader writes it:\n%s", expanded)
	t.Logf("as Debian's Prometheus runs it (kubernetes_sd_configs served by kubesd):\n%s", files[debianConfig])

	cmd := ns.Exec("unshare", "--mount", "--propagation", "private", "sh", "-c", script.String())
	cmd.Env = []string{"PATH=/usr/bin:/bin:/usr/sbin:/sbin",
		"KUBERNETES_SERVICE_HOST=127.0.0.1", fmt.Sprintf("KUBERNETES_SERVICE_PORT=%d", cp.Port)}
	logf, err := os.Create(p.logFile)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		logf.Close()
		if t.Failed() {
			t.Logf("prometheus log:\n%s", p.log())
		}
	})
	base := "http://" + listen
	if err := harness.Poll(30*time.Second, 200*time.Millisecond, "Prometheus ready", func() (bool, string) {
		resp, err := ns.HTTPClient().Get(base + "/-/ready")
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode == 200, resp.Status
	}); err != nil {
		t.Fatalf("%v\n%s", err, p.log())
	}
	return base
}

// getJSON GETs u inside ns and decodes the JSON answer into v.
func getJSON(t *testing.T, ns *harness.Netns, u string, v any) {
	t.Helper()
	resp, err := ns.HTTPClient().Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v\n%s", u, err, b)
	}
}

// alertNames lists (sorted) the alerts of the nodeaddr group in the operator's rule files.
func alertNames(t *testing.T, rules map[string]string) []string {
	t.Helper()
	var names []string
	for key, content := range rules {
		var f struct {
			Groups []struct {
				Name  string
				Rules []struct{ Alert string }
			}
		}
		if err := yaml.Unmarshal([]byte(content), &f); err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		for _, g := range f.Groups {
			if g.Name != "nodeaddr" {
				continue
			}
			for _, r := range g.Rules {
				if r.Alert != "" {
					names = append(names, r.Alert)
				}
			}
		}
	}
	if len(names) == 0 {
		t.Fatal("the operator's rule files hold no alert of the group nodeaddr")
	}
	slices.Sort(names)
	return names
}

// loadedRules returns the alerts Prometheus loaded in the group nodeaddr and the group's last
// evaluation; a rule that failed to evaluate fails the test.
func loadedRules(t *testing.T, ns *harness.Netns, base string) ([]string, time.Time) {
	t.Helper()
	var r struct {
		Data struct {
			Groups []struct {
				Name           string
				LastEvaluation time.Time
				Rules          []struct {
					Name, Type, Health, LastError string
				}
			}
		}
	}
	getJSON(t, ns, base+"/api/v1/rules", &r)
	var names []string
	var last time.Time
	for _, g := range r.Data.Groups {
		if g.Name != "nodeaddr" {
			continue
		}
		last = g.LastEvaluation
		for _, rule := range g.Rules {
			if rule.Type == "alerting" {
				names = append(names, rule.Name)
			}
			if rule.Health == "err" {
				t.Errorf("rule %s: %s", rule.Name, rule.LastError)
			}
		}
	}
	return names, last
}

// withHTTPSD replaces each scrape job's kubernetes_sd_configs by an http_sd_configs asking kubesd at
// addr for that job (every 5 s), and changes nothing else.
func withHTTPSD(t *testing.T, config, addr string) []byte {
	t.Helper()
	var c map[string]any
	if err := yaml.Unmarshal([]byte(config), &c); err != nil {
		t.Fatal(err)
	}
	jobs, _ := c["scrape_configs"].([]any)
	n := 0
	for _, j := range jobs {
		job := j.(map[string]any)
		if _, ok := job["kubernetes_sd_configs"]; !ok {
			continue
		}
		delete(job, "kubernetes_sd_configs")
		job["http_sd_configs"] = []any{map[string]any{
			"url":              "http://" + addr + "/sd?" + url.Values{"job": {job["job_name"].(string)}}.Encode(),
			"refresh_interval": "5s",
		}}
		n++
	}
	if n == 0 {
		t.Fatal("the generated configuration has no kubernetes_sd_configs")
	}
	b, err := yaml.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
