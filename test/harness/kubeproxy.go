package harness

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// KubeProxy is kube-proxy running as a host process in the node's namespace, started again
// whenever it exits, as systemd's Restart=always (RestartSec 100 ms) would. kube-proxy's NodeManager
// exits on every change of its Node's primary IPs so that its supervisor restarts it with the new
// ones (kubernetes#138183): Exits counts those restarts.
type KubeProxy struct {
	n    *RealNode
	args []string
	log  string

	mu    sync.Mutex
	exits []time.Time
	stop  chan struct{}
	done  chan struct{}
}

// StartKubeProxy starts kube-proxy in nftables mode with --nodeport-addresses=primary (NodePorts
// on the Node's primary IPs, read from the Node object), authenticated as system:kube-proxy, and
// supervises it until the test ends. nft must be installed (Debian nftables).
func (n *RealNode) StartKubeProxy() *KubeProxy {
	t := n.T
	t.Helper()
	nft := Tool(t, "nft", "nftables")
	kc := writeKubeconfig(t, filepath.Join(n.Dir, "kube-proxy.kubeconfig"),
		fmt.Sprintf("https://127.0.0.1:%d", n.C.CP.Port), n.C.KubeProxyToken, n.C.CP.CAFile)
	clusterCIDR := cmp.Or(n.C.Options.ClusterCIDR, "10.244.0.0/24")
	if n.C.Options.DualStack {
		clusterCIDR += "," + PodCIDR6
	}
	k := &KubeProxy{n: n, log: filepath.Join(n.Dir, "kube-proxy.log"), stop: make(chan struct{}), done: make(chan struct{}),
		args: []string{"--kubeconfig=" + kc, "--hostname-override=" + n.Name,
			"--proxy-mode=nftables", "--nodeport-addresses=primary", "--cluster-cidr=" + clusterCIDR,
			// Leave conntrack alone: nf_conntrack_max is the machine's, not the namespace's.
			"--conntrack-max-per-core=0", "--conntrack-tcp-timeout-established=0", "--conntrack-tcp-timeout-close-wait=0",
			"--metrics-bind-address=127.0.0.1:10249", "--healthz-bind-address=127.0.0.1:10256", "--v=2"}}
	path := filepath.Dir(nft) + ":" + os.Getenv("PATH")
	go k.supervise(path)
	t.Cleanup(func() {
		close(k.stop)
		<-k.done
		if t.Failed() {
			t.Logf("last lines of kube-proxy.log:\n%s", tailFile(k.log, 30))
		}
	})
	return k
}

func (k *KubeProxy) supervise(path string) {
	defer close(k.done)
	for {
		cmd := k.n.nsenter(k.n.C.Bins.KubeProxy, k.args...)
		cmd.Env = append(cmd.Env, "PATH="+path)
		p, err := startLogged(cmd, k.log)
		if err != nil {
			k.n.T.Errorf("start kube-proxy: %v", err)
			return
		}
		select {
		case <-k.stop:
			p.stop()
			return
		case <-p.done:
		}
		k.mu.Lock()
		k.exits = append(k.exits, time.Now())
		k.mu.Unlock()
		select {
		case <-k.stop:
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Exits returns when kube-proxy exited (and was restarted), in order.
func (k *KubeProxy) Exits() []time.Time {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]time.Time(nil), k.exits...)
}

// ExitReasons returns the lines in which kube-proxy said why it exits ("NodeIPs changed").
func (k *KubeProxy) ExitReasons() []string {
	b, _ := os.ReadFile(k.log)
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, "changed for the node") || strings.Contains(l, "Node is being deleted") {
			out = append(out, l)
		}
	}
	return out
}
