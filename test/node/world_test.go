package node

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

// The node's uplink, from the documentation ranges, inside the test's namespace only.
const (
	uplinkV4, gatewayV4 = "192.0.2.10", "192.0.2.1"
	uplinkV6, gatewayV6 = "2001:db8::10", "2001:db8::1"
	// agentImage is the tag the test's overlay sets, as a user pointing the base at their build.
	agentImageTag = "e2e"
)

// expectedAddresses is exactly what the shipped defaults publish for this uplink, in order: one
// InternalIP per family (the source of the route toward the default targets), then the kubelet's
// Hostname entry, kept. The ExternalIPs equal the InternalIPs and are not published (local-ccm's
// rule, --external-ip-equal-internal=drop). This is the one place to change when the defaults do.
func expectedAddresses(node string) []corev1.NodeAddress {
	return []corev1.NodeAddress{
		{Type: corev1.NodeInternalIP, Address: uplinkV4},
		{Type: corev1.NodeInternalIP, Address: uplinkV6},
		{Type: corev1.NodeHostName, Address: node},
	}
}

// registeredAddresses is the list a kubelet of release version registers its Node with when it
// runs with --cloud-provider=external and without --node-ip (pkg/kubelet/nodestatus/setters.go):
// only its Hostname since 1.31 (kubernetes PR 125337); nothing at all in 1.29 and 1.30 (PR 121028:
// it waits for the cloud provider). Seen on the real 1.30.14 and 1.37.2 kubelets.
func registeredAddresses(version, node string) []corev1.NodeAddress {
	if harness.Minor(version) < 31 {
		return nil
	}
	return []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: node}}
}

// expectedAddressesOn is expectedAddresses on a Node that a kubelet of release version registered:
// the defaults' InternalIPs, then what the kubelet registered, kept. A 1.30 Node gets no Hostname
// entry (nodeaddr never adds one; its admission policy forbids it).
func expectedAddressesOn(version, node string) []corev1.NodeAddress {
	return append(expectedAddresses(node)[:2:2], registeredAddresses(version, node)...)
}

// world is one real cluster with one real node.
type world struct {
	t    *testing.T
	c    *harness.NodeCluster
	node *harness.RealNode
	ns   *harness.Netns
	// router is the namespace at the other end of eth0 (the gateways' addresses).
	router  *harness.Netns
	kubectl string
	// admin is a kubeconfig with system:masters rights, for kubectl.
	admin string
}

// defaultUplink gives eth0 uplinkV4 and uplinkV6 with default routes through them.
func defaultUplink(ns, _ *harness.Netns) {
	ns.IP("addr", "add", uplinkV4+"/24", "dev", "eth0")
	ns.IP("route", "add", "default", "via", gatewayV4, "dev", "eth0")
	ns.IP("-6", "addr", "add", uplinkV6+"/64", "dev", "eth0", "nodad")
	ns.IP("-6", "route", "add", "default", "via", gatewayV6, "dev", "eth0")
}

// worldOptions shape a world; the zero value is the default one.
type worldOptions struct {
	// version is every Kubernetes component's release, harness.KubernetesVersion if empty.
	version string
	// cluster shapes the control plane (a hardened one, dual-stack).
	cluster harness.ClusterOptions
	// node shapes the real node (images to import, kubelet flags).
	node harness.NodeOptions
	// uplink numbers the node's eth0 from both ends (the node's namespace and the router's, where
	// a router daemon may run) before the kubelet starts; defaultUplink if nil.
	uplink func(ns, router *harness.Netns)
}

// newWorld starts the control plane, the node's namespace with its uplink eth0 toward a router
// namespace (numbered by o.uplink), and containerd + the kubelet with the nodeaddr image imported.
func newWorld(t *testing.T, o worldOptions) *world {
	t.Helper()
	if o.version == "" {
		o.version = harness.KubernetesVersion
	}
	if o.uplink == nil {
		o.uplink = defaultUplink
	}
	name := "rn-" + randHex(3)
	c := harness.StartNodeClusterWith(t, name, o.version, o.cluster)
	ns := harness.NewNetns(t, "node")
	router := harness.NewNetns(t, "rtr")
	ns.Link("eth0", router, "r-eth0")
	o.uplink(ns, router)
	w := &world{t: t, c: c, ns: ns, router: router, kubectl: harness.MustBuild(t).Kubectl}
	w.admin = c.AdminKubeconfig(t)
	o.node.Images = append(o.node.Images, w.agentImage(w.baseImage()+":"+agentImageTag))
	w.node = c.StartNode(ns, o.node)
	w.node.RecordNetns(router.Name)
	return w
}

var (
	imageBinOnce sync.Once
	imageBin     string
	imageBinDir  string
	imageBinErr  error
)

// agentImage builds nodeaddr with the Dockerfile's recipe (once per run) and writes it as an image
// tagged ref.
func (w *world) agentImage(ref string) string {
	w.t.Helper()
	imageBinOnce.Do(func() {
		// Built fresh from the working tree for each run, removed by TestMain.
		var dir string
		if dir, imageBinErr = os.MkdirTemp("", "nodeaddr-image"); imageBinErr != nil {
			return
		}
		imageBinDir = dir
		imageBin = filepath.Join(dir, "nodeaddr")
		imageBinErr = harness.BuildImageBinary(os.Stderr, "e2e", imageBin)
	})
	if imageBinErr != nil {
		w.t.Fatal(imageBinErr)
	}
	tar := filepath.Join(w.c.CP.Dir, "nodeaddr-image.tar")
	err := harness.WriteImage(tar, ref, imageBin, harness.ImageBinary, harness.ImageUser, harness.ImageEntrypoint)
	if err != nil {
		w.t.Fatal(err)
	}
	return tar
}

// baseImage is the image name (without tag) the shipped base renders, whatever registry it names.
func (w *world) baseImage() string {
	w.t.Helper()
	out := w.run(w.kubectl, "kustomize", filepath.Join(harness.RepoDir(), "deploy"))
	for _, doc := range strings.Split(out, "\n---\n") {
		var obj struct {
			Kind string `json:"kind"`
			Spec struct {
				Template struct {
					Spec corev1.PodSpec `json:"spec"`
				} `json:"template"`
			} `json:"spec"`
		}
		if yaml.Unmarshal([]byte(doc), &obj) == nil && obj.Kind == "DaemonSet" {
			img := obj.Spec.Template.Spec.Containers[0].Image
			if i := strings.LastIndex(img, ":"); i > strings.LastIndex(img, "/") {
				img = img[:i]
			}
			return img
		}
	}
	w.t.Fatal("no DaemonSet in the shipped base")
	return ""
}

// overlay writes a kustomize overlay over the shipped base, as a user would: their image tag, and
// the API server's real endpoint (the relay on the node's loopback; no kube-proxy serves the
// kubernetes Service VIP here), plus args appended to the agent's.
func (w *world) overlay(args ...string) string {
	w.t.Helper()
	return w.overlayWith(nil, args...)
}

// overlayWith is overlay with the shipped components named (directories under deploy/components).
func (w *world) overlayWith(components []string, args ...string) string {
	w.t.Helper()
	dir := filepath.Join(w.c.CP.Dir, "overlay")
	os.MkdirAll(dir, 0o755)
	base, err := filepath.Rel(dir, filepath.Join(harness.RepoDir(), "deploy"))
	if err != nil {
		w.t.Fatal(err)
	}
	writeFile(w.t, filepath.Join(dir, "kustomization.yaml"), fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources: [%q]
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
`, base, w.baseImage(), agentImageTag, w.c.CP.Port)+argPatches(args)+componentList(dir, components))
	return dir
}

// componentList is the overlay's components: line for the shipped components named.
func componentList(dir string, components []string) string {
	if len(components) == 0 {
		return ""
	}
	var paths []string
	for _, c := range components {
		p, _ := filepath.Rel(dir, filepath.Join(harness.RepoDir(), "deploy", "components", c))
		paths = append(paths, fmt.Sprintf("%q", p))
	}
	return "components: [" + strings.Join(paths, ", ") + "]\n"
}

func argPatches(args []string) string {
	var b strings.Builder
	for _, a := range args {
		fmt.Fprintf(&b, "      - op: add\n        path: /spec/template/spec/containers/0/args/-\n        value: %q\n", a)
	}
	return b.String()
}

// run runs a command and fails the test on error.
func (w *world) run(name string, args ...string) string {
	w.t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		w.t.Fatalf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, out)
	}
	return string(out)
}

// kubectlAdmin runs kubectl as the cluster admin.
func (w *world) kubectlAdmin(args ...string) string {
	w.t.Helper()
	return w.run(w.kubectl, append([]string{"--kubeconfig", w.admin}, args...)...)
}

// agentPod returns the DaemonSet's pod on the real node (a test's API-only Node gets one too), or nil.
func (w *world) agentPod() *corev1.Pod {
	pods, err := w.c.CP.Admin.CoreV1().Pods("kube-system").List(context.Background(),
		metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=nodeaddr", FieldSelector: "spec.nodeName=" + w.node.Name})
	if err != nil || len(pods.Items) == 0 {
		return nil
	}
	return &pods.Items[0]
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}

func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return fmt.Sprintf("%x", b)
}
