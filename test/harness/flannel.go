package harness

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// FlannelVersion is the flannel release the two-node cluster runs (vxlan backend, kube subnet
// manager), built from the Go module proxy.
const FlannelVersion = "v0.28.10"

// FlannelImage is the tag the harness imports the flanneld image under.
const FlannelImage = "nodeaddr.test/flannel:" + FlannelVersion

// The flanneld build module: flannel's own main.go, whose blank imports register every backend,
// some of which need modules the Go module proxy does not serve (tencentcloud's SDK): the build
// keeps only the vxlan backend's import. go.mod and go.sum pin what `go mod tidy` chose for it,
// so a cold build downloads exactly those versions.
var (
	//go:embed flannel/go.mod.txt
	flannelGoMod []byte
	//go:embed flannel/go.sum.txt
	flannelGoSum []byte
	// flannelBackends matches the blank imports of the backends the build drops.
	flannelBackends = regexp.MustCompile(`(?m)^\s*_ "github.com/flannel-io/flannel/pkg/backend/(alloc|extension|hostgw|ipip|ipsec|tencentvpc|udp|wireguard)"\n`)
)

// BuildFlannel builds flanneld (static) into the cache once and returns its path. Cold, about
// 6 minutes on 2 busy cores.
func BuildFlannel(progress io.Writer) (string, error) {
	out := filepath.Join(CacheDir(), "bin", "flannel-"+FlannelVersion, "flanneld")
	return out, onceBuilt("flannel-"+FlannelVersion, func() error {
		if !missing(out) {
			return nil
		}
		dir := filepath.Join(CacheDir(), "src", "flannel-"+FlannelVersion)
		unlock, err := lockFile(dir + ".lock")
		if err != nil {
			return err
		}
		defer unlock()
		if !missing(out) {
			return nil
		}
		start := time.Now()
		fmt.Fprintf(progress, "harness: building flanneld %s from the Go module proxy (cold: ~6 min on 2 cores)\n", FlannelVersion)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		for name, data := range map[string][]byte{"go.mod": flannelGoMod, "go.sum": flannelGoSum} {
			if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
				return err
			}
		}
		dl := exec.Command("go", "mod", "download", "-json", "github.com/flannel-io/flannel@"+FlannelVersion)
		dl.Dir = dir
		b, err := dl.Output()
		if err != nil {
			return fmt.Errorf("go mod download flannel: %w", err)
		}
		var mod struct{ Dir string }
		if err := json.Unmarshal(b, &mod); err != nil {
			return fmt.Errorf("go mod download flannel: %w", err)
		}
		main, err := os.ReadFile(filepath.Join(mod.Dir, "main.go"))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, "main.go"), flannelBackends.ReplaceAll(main, nil), 0o644); err != nil {
			return err
		}
		err = goBuild(progress, dir, ".", out, []string{"CGO_ENABLED=0", "GOFLAGS=-mod=mod"}, "-trimpath",
			"-ldflags=-s -w -X github.com/flannel-io/flannel/pkg/version.Version="+FlannelVersion)
		if err == nil {
			fmt.Fprintf(progress, "harness: flanneld ready in %s\n", time.Since(start).Round(time.Second))
		}
		return err
	})
}

// FlannelImageTar writes the flanneld image (the static binary at /opt/bin/flanneld, as upstream's
// image has it, run as root: it creates the vxlan device and routes) into dir and returns the tar.
func FlannelImageTar(t testing.TB, dir string) string {
	t.Helper()
	bin := mustBuild(t, "flanneld", BuildFlannel)
	tar := filepath.Join(dir, "flannel-image.tar")
	if err := WriteImage(tar, FlannelImage, bin, "/opt/bin/flanneld", "0:0", []string{"/opt/bin/flanneld"}); err != nil {
		t.Fatal(err)
	}
	return tar
}

// Flannel is flannel deployed as upstream's kube-flannel.yml deploys it: a DaemonSet on the host
// network in kube-flannel, the kube subnet manager (each Node's pod CIDR from
// kube-controller-manager), the vxlan backend, its public address found as upstream finds it (the
// interface of the default route) unless args say otherwise. Its subnet file goes to RunDir/NODE
// (a hostPath per node: every node of the test shares the machine's filesystem).
type Flannel struct {
	RunDir string
}

// Manifest is the YAML that deploys flannel for a cluster whose pods come from network
// (the kube-controller-manager's --cluster-cidr) and whose API server is at 127.0.0.1:port in
// every node's namespace (the relay StartNode starts); args are appended to flanneld's.
func (f *Flannel) Manifest(network string, port int, args ...string) string {
	extra := ""
	for _, a := range args {
		extra += fmt.Sprintf("\n        - %q", a)
	}
	return fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata: {name: kube-flannel}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: flannel, namespace: kube-flannel}
---
# Upstream's ClusterRole: flannel reads Nodes (pod CIDRs, its peers' public addresses) and
# annotates its own, and marks its Node's network available.
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: flannel}
rules:
- apiGroups: [""]
  resources: [pods]
  verbs: [get]
- apiGroups: [""]
  resources: [nodes]
  verbs: [get, list, watch]
- apiGroups: [""]
  resources: [nodes/status]
  verbs: [patch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: flannel}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: flannel}
subjects: [{kind: ServiceAccount, name: flannel, namespace: kube-flannel}]
---
apiVersion: v1
kind: ConfigMap
metadata: {name: kube-flannel-cfg, namespace: kube-flannel}
data:
  net-conf.json: |
    {"Network": %[1]q, "EnableNFTables": false, "Backend": {"Type": "vxlan"}}
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: kube-flannel-ds, namespace: kube-flannel, labels: {app: flannel}}
spec:
  selector: {matchLabels: {app: flannel}}
  template:
    metadata: {labels: {app: flannel}}
    spec:
      hostNetwork: true
      priorityClassName: system-node-critical
      serviceAccountName: flannel
      tolerations: [{operator: Exists}]
      containers:
      - name: kube-flannel
        image: %[2]s
        imagePullPolicy: Never
        # No --ip-masq: pod traffic never leaves the test's namespaces. No iptables FORWARD rules:
        # the image has no iptables binary, and nothing here drops forwarded traffic.
        args:
        - --kube-subnet-mgr
        - --iptables-forward-rules=false
        - --subnet-file=/run/flannel/subnet.env%[3]s
        env:
        - {name: POD_NAME, valueFrom: {fieldRef: {fieldPath: metadata.name}}}
        - {name: POD_NAMESPACE, valueFrom: {fieldRef: {fieldPath: metadata.namespace}}}
        - {name: NODE_NAME, valueFrom: {fieldRef: {fieldPath: spec.nodeName}}}
        - {name: KUBERNETES_SERVICE_HOST, value: "127.0.0.1"}
        - {name: KUBERNETES_SERVICE_PORT, value: "%[4]d"}
        - {name: EVENT_QUEUE_DEPTH, value: "5000"}
        securityContext:
          privileged: false
          capabilities: {add: [NET_ADMIN, NET_RAW]}
        volumeMounts:
        - {name: run, mountPath: /run/flannel, subPathExpr: $(NODE_NAME)}
        - {name: flannel-cfg, mountPath: /etc/kube-flannel/}
      volumes:
      - {name: run, hostPath: {path: %[5]q, type: DirectoryOrCreate}}
      - {name: flannel-cfg, configMap: {name: kube-flannel-cfg}}
`, network, FlannelImage, extra, port, f.RunDir)
}

// WriteFlannelCNI waits until flannel on n wrote its subnet file and writes the CNI configuration
// that flannel's CNI plugin would delegate to (github.com/flannel-io/cni-plugin, not served by
// the Go module proxy): a bridge that is every pod's default gateway, host-local addresses from
// FLANNEL_SUBNET with a route to FLANNEL_NETWORK, flannel's MTU, and hairpin mode. The node turns
// Ready once containerd reads it. It returns FLANNEL_SUBNET.
func (n *RealNode) WriteFlannelCNI(f *Flannel, timeout time.Duration) string {
	t := n.T
	t.Helper()
	file := filepath.Join(f.RunDir, n.Name, "subnet.env")
	env := map[string]string{}
	Eventually(t, timeout, 200*time.Millisecond, "flannel's subnet file "+file, func() (bool, string) {
		b, err := os.ReadFile(file)
		if err != nil {
			return false, err.Error()
		}
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, "="); ok {
				env[k] = v
			}
		}
		return env["FLANNEL_SUBNET"] != "" && env["FLANNEL_NETWORK"] != "" && env["FLANNEL_MTU"] != "", string(b)
	})
	_, subnet, err := net.ParseCIDR(env["FLANNEL_SUBNET"])
	if err != nil {
		t.Fatalf("flannel's subnet file %s: %v", file, err)
	}
	n.writeCNI(fmt.Sprintf(`{"cniVersion": "1.0.0", "name": %q, "plugins": [
  {"type": "bridge", "bridge": "cni0", "isGateway": true, "isDefaultGateway": true, "hairpinMode": true,
   "ipMasq": false, "mtu": %s,
   "ipam": {"type": "host-local", "dataDir": %q, "ranges": [[{"subnet": %q}]],
            "routes": [{"dst": %q}]}},
  {"type": "portmap", "capabilities": {"portMappings": true}}
]}`, n.cniNetwork(), env["FLANNEL_MTU"], filepath.Join(n.Dir, "cni"), subnet, env["FLANNEL_NETWORK"]))
	return subnet.String()
}
