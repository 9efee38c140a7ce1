// Package cluster proves nodeaddr on a cluster of two real nodes: each a kubelet, containerd and
// runc in its own network namespace, both on one LAN whose addresses a real DHCP server leases,
// with flannel (vxlan) carrying the pod network between them and kube-proxy on each. The shipped
// base and the kubelet-serving-csr component run on their defaults. Run it alone: `make
// test-cluster` (go test -p 1).
package cluster

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

func TestMain(m *testing.M) {
	code := harness.MainE2E(m)
	if imageBinDir != "" {
		os.RemoveAll(imageBinDir)
	}
	os.Exit(code)
}

// The cluster's shape: the LAN's addresses the DHCP server reserves for each node, the pod
// network flannel carves into one /24 per Node, and the images the nodes run.
const (
	nodeA, nodeB = "node-a", "node-b"
	ipA, ipB     = harness.LANPrefix + "11", harness.LANPrefix + "12"
	podNetwork   = "10.244.0.0/16"
	webImage     = "nodeaddr.test/webpod:e2e"
	agentTag     = "e2e"
)

// cluster is the two-node cluster with everything the scenarios look at.
type cluster struct {
	t       *testing.T
	c       *harness.NodeCluster
	lan     *harness.LAN
	nodes   map[string]*node
	flannel *harness.Flannel
	kubectl string
	admin   string // a kubeconfig with system:masters rights
	scraper string // Prometheus' token for the agents' /metrics (harness.ScraperToken)
}

// node is one real node and its kube-proxy.
type node struct {
	*harness.RealNode
	proxy *harness.KubeProxy
	// subnet is the pod CIDR flannel wrote for it.
	subnet string
}

// newCluster starts the control plane, the LAN with both nodes leased by DHCP, the nodes
// (NotReady: no CNI configuration yet), the API server on the LAN (the router) and kube-proxy on
// each, then flannel; it writes each node's CNI configuration from flannel's subnet file, and
// applies the shipped base with the kubelet-serving-csr component. It returns once both Nodes
// are Ready.
func newCluster(t *testing.T) *cluster {
	t.Helper()
	c := harness.StartNodeClusterWith(t, nodeA, harness.KubernetesVersion,
		harness.ClusterOptions{Hardened: true, Nodes: []string{nodeB}, ClusterCIDR: podNetwork,
			Controllers: []string{"disruption-controller"}}) // the guarded workload's PodDisruptionBudget (pdb_test.go)
	w := &cluster{t: t, c: c, lan: harness.NewLAN(t), nodes: map[string]*node{},
		flannel: &harness.Flannel{RunDir: t.TempDir()}, kubectl: harness.MustBuild(t).Kubectl}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("DHCP server's log:\n%s", w.lan.Log())
		}
	})
	w.admin = c.AdminKubeconfig(t)
	images := w.images()
	for _, n := range []struct{ name, ip string }{{nodeA, ipA}, {nodeB, ipB}} {
		ns := harness.NewNetns(t, n.name)
		w.lan.Join(ns, n.ip)
		// As on a host: the old address's routes go when it does (promote_secondaries), and the
		// node forwards its pods' traffic (flannel's vxlan, kube-proxy's NodePorts).
		ns.Sysctl("net.ipv4.conf.all.promote_secondaries", "1")
		ns.Sysctl("net.ipv4.ip_forward", "1")
		rn := c.StartNode(ns, harness.NodeOptions{Name: n.name, PodNetwork: "flannel", Images: images,
			ClusterDNS: harness.ClusterDNSIP})
		rn.RecordNetns(w.lan.Router.Name)
		w.nodes[n.name] = &node{RealNode: rn}
	}
	c.ReachKubeletsFrom(w.lan.Router)
	// The API server as the nodes' pods reach it: on the LAN, at the router's address, as a control
	// plane outside the nodes is. kube-proxy masquerades Service traffic (--masquerade-all), so the
	// answers to the pods' requests come back through their node: the LAN routes no pod addresses.
	apiServer := net.JoinHostPort(harness.LANPrefix+"1", strconv.Itoa(c.CP.Port))
	w.lan.Router.RelayAt(apiServer, fmt.Sprintf("127.0.0.1:%d", c.CP.Port))
	c.PublishAPIServer(harness.LANPrefix + "1")
	for _, n := range w.nodes {
		n.proxy = n.StartKubeProxy("--masquerade-all")
	}
	manifest := filepath.Join(c.CP.Dir, "flannel.yaml")
	writeFile(t, manifest, w.flannel.Manifest(podNetwork, c.CP.Port))
	w.kubectlAdmin("apply", "-f", manifest)
	for _, n := range w.nodes {
		n.subnet = n.WriteFlannelCNI(w.flannel, 3*time.Minute)
	}
	w.kubectlAdmin("apply", "-k", w.overlay(false, 0))
	w.kubectlAdmin("apply", "-f", filepath.Join(harness.RepoDir(), "deploy", "monitoring", "service.yaml"))
	for name := range w.nodes {
		c.CP.WaitNode(t, name, 3*time.Minute, "Ready", func(n *corev1.Node) bool {
			for _, cond := range n.Status.Conditions {
				if cond.Type == corev1.NodeReady {
					return cond.Status == corev1.ConditionTrue
				}
			}
			return false
		})
	}
	// Cluster DNS, for Kubernetes' own e2e tests (they dial Services by name).
	c.DeployClusterDNS()
	return w
}

var (
	imageBinOnce sync.Once
	imageBin     string
	imageBinDir  string
	imageBinErr  error
)

// images writes the images every node imports: nodeaddr (the Dockerfile's recipe, tagged as the
// overlay names it), flanneld, the web pod, CoreDNS and Kubernetes' e2e test images.
func (w *cluster) images() []string {
	t := w.t
	t.Helper()
	agent, dir := w.agentImage(), w.c.CP.Dir
	web := filepath.Join(dir, "webpod.tar")
	if err := harness.WriteImage(web, webImage, harness.MustBuildNode(t).Webpod, "/webpod", harness.ImageUser, []string{"/webpod", "serve"}); err != nil {
		t.Fatal(err)
	}
	e2e, err := harness.WriteE2EImages(dir, harness.MustBuildE2E(t))
	if err != nil {
		t.Fatal(err)
	}
	dns, err := harness.WriteCoreDNSImage(dir, harness.MustBuildCoreDNS(t))
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{agent, harness.FlannelImageTar(t, dir), web, dns}, e2e...)
}

// baseImage is the image name (without tag) the shipped DaemonSet names.
func (w *cluster) baseImage() string {
	w.t.Helper()
	out := w.run(w.kubectl, "kustomize", filepath.Join(harness.RepoDir(), "deploy"))
	for _, line := range strings.Split(out, "\n") {
		if img, ok := strings.CutPrefix(strings.TrimSpace(line), "image: "); ok && strings.Contains(img, "nodeaddr") {
			return img[:strings.LastIndex(img, ":")]
		}
	}
	w.t.Fatal("no nodeaddr image in the shipped base")
	return ""
}

// overlay writes the user's overlay: the shipped base with the kubelet-serving-csr component (and
// pod-remediation if remediation, with its grace set to grace), their image tag, and the agent
// pointed at the API server's relay on each node's loopback (the kubernetes Service's ClusterIP
// needs kube-proxy, which needs the Node's addresses first).
func (w *cluster) overlay(remediation bool, grace time.Duration) string {
	w.t.Helper()
	components, extra := []string{"kubelet-serving-csr"}, ""
	if remediation {
		components = append(components, "pod-remediation")
		extra = fmt.Sprintf(`  - target: {kind: Deployment, name: nodeaddr-remediator}
    patch: |
      - op: add
        path: /spec/template/spec/containers/0/args/-
        value: --grace=%s
`, grace)
	}
	return w.overlayWith(components, nil, extra)
}

// overlayWith writes the overlay with the shipped components named, agentArgs appended to the
// agent's arguments and extra patches (YAML list items under patches:).
func (w *cluster) overlayWith(components, agentArgs []string, extra string) string {
	w.t.Helper()
	dir := filepath.Join(w.c.CP.Dir, "overlay")
	os.MkdirAll(dir, 0o755)
	rel := func(p string) string {
		r, err := filepath.Rel(dir, filepath.Join(harness.RepoDir(), "deploy", p))
		if err != nil {
			w.t.Fatal(err)
		}
		return fmt.Sprintf("%q", r)
	}
	var comps []string
	for _, c := range components {
		comps = append(comps, rel("components/"+c))
	}
	for _, a := range agentArgs {
		extra += fmt.Sprintf(`  - target: {kind: DaemonSet, name: nodeaddr}
    patch: |
      - op: add
        path: /spec/template/spec/containers/0/args/-
        value: %q
`, a)
	}
	components = comps
	writeFile(w.t, filepath.Join(dir, "kustomization.yaml"), fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources: [%s]
components: [%s]
images:
  - name: %s
    newTag: %s
patches:
  - target: {kind: DaemonSet, name: nodeaddr}
    patch: |
      - op: add
        path: /spec/template/spec/containers/0/env/-
        value: {name: KUBERNETES_SERVICE_HOST, value: "127.0.0.1"}
      - op: add
        path: /spec/template/spec/containers/0/env/-
        value: {name: KUBERNETES_SERVICE_PORT, value: "%d"}
`, rel("."), strings.Join(components, ", "), w.baseImage(), agentTag, w.c.CP.Port)+extra)
	return dir
}

// diagnose logs, when t failed, what the pods and flannel were doing (while the nodes still run:
// call it from a subtest's cleanup).
func (w *cluster) diagnose(t *testing.T) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		out, _ := w.tryKubectl("get", "pods", "-A", "-o", "wide")
		t.Logf("pods:\n%s", out)
		out, _ = w.tryKubectl("logs", "-n", "kube-flannel", "-l", "app=flannel", "--tail=40", "--prefix")
		t.Logf("flannel's logs:\n%s", out)
		out, _ = w.tryKubectl("get", "events", "-A", "--sort-by=.lastTimestamp")
		t.Logf("events:\n%s", out)
	})
}

// pinned is a Deployment of one web pod on node (the web pod serves HTTP on 8080 and logs).
func pinned(name, node string, hostNetwork bool) *appsv1.Deployment {
	one := int32(1)
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: appsv1.DeploymentSpec{Replicas: &one, Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
				NodeName: node, HostNetwork: hostNetwork,
				Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
				Containers: []corev1.Container{{Name: "web", Image: webImage, ImagePullPolicy: corev1.PullNever,
					Ports: []corev1.ContainerPort{{ContainerPort: 8080}},
					// What MetalLB's speaker or konnectivity's agent read: frozen at container start.
					Env: []corev1.EnvVar{{Name: "HOST_IP", ValueFrom: &corev1.EnvVarSource{
						FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.hostIP"}}}}}},
			}}}}
}

// kubectlAdmin runs kubectl as the cluster admin and fails the test on error.
func (w *cluster) kubectlAdmin(args ...string) string {
	w.t.Helper()
	return w.run(w.kubectl, append([]string{"--kubeconfig", w.admin}, args...)...)
}

// tryKubectl runs kubectl as the admin and returns its output and error.
func (w *cluster) tryKubectl(args ...string) (string, error) {
	out, err := exec.Command(w.kubectl, append([]string{"--kubeconfig", w.admin, "--request-timeout=5s"}, args...)...).CombinedOutput()
	return string(out), err
}

func (w *cluster) run(name string, args ...string) string {
	w.t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		w.t.Fatalf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, out)
	}
	return string(out)
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}
