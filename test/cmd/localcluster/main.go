// Command localcluster is `make run`: a throwaway etcd + kube-apiserver on loopback, a Node named
// after this host with the uninitialized taint, and nodeaddr running in the foreground against it for
// this host's real network. It prints the Node's addresses and taints each time they change; Ctrl-C
// stops everything and removes every file it made.
package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "make run:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	bins, err := harness.BuildControlPlane(os.Stderr)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "nodeaddr-run-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	cp, err := harness.NewControlPlane(bins, dir)
	if err != nil {
		return err
	}
	fmt.Fprintln(os.Stderr, "make run: starting etcd and kube-apiserver", harness.KubernetesVersion, "on 127.0.0.1 ...")
	defer cp.Stop()
	if err := cp.Start(ctx); err != nil {
		return err
	}
	host, err := os.Hostname()
	if err != nil {
		return err
	}
	node := strings.ToLower(host)
	if _, err := cp.Admin.CoreV1().Nodes().Create(ctx, &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: node},
		Spec:       corev1.NodeSpec{Taints: []corev1.Taint{harness.Uninitialized}},
	}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create node %s: %w", node, err)
	}
	kc := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kc, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: local, cluster: {server: "https://127.0.0.1:%d", insecure-skip-tls-verify: true}}]
users: [{name: admin, user: {token: %s}}]
contexts: [{name: local, context: {cluster: local, user: admin}}]
current-context: local
`, cp.Port, cp.AdminToken)), 0o600); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "make run: control plane ready; Node %q created with the uninitialized taint\n", node)
	fmt.Fprintf(os.Stderr, "make run: kubeconfig for kubectl while it runs: %s\n", kc)

	go watchNode(ctx, cp, node)

	// Plain-HTTP metrics on loopback for curl; later arguments override these.
	args := append([]string{"--kubeconfig=" + kc, "--node-name=" + node,
		"--metrics-bind-address=127.0.0.1:9810", "--metrics-secure=false"}, os.Args[1:]...)
	fmt.Fprintln(os.Stderr, "make run: nodeaddr", strings.Join(args, " "))
	agent := exec.CommandContext(ctx, bins.Nodeaddr, args...)
	agent.Stdout, agent.Stderr = os.Stdout, os.Stderr
	agent.Cancel = func() error { return agent.Process.Signal(syscall.SIGTERM) }
	if err := agent.Run(); err != nil && ctx.Err() == nil {
		return fmt.Errorf("nodeaddr: %w", err)
	}
	fmt.Fprintln(os.Stderr, "make run: stopped, cleaning up")
	return nil
}

// watchNode prints the Node's addresses and taints whenever they change.
func watchNode(ctx context.Context, cp *harness.ControlPlane, node string) {
	w, err := cp.Admin.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", node).String()})
	if err != nil {
		fmt.Fprintln(os.Stderr, "make run: watch node:", err)
		return
	}
	defer w.Stop()
	last := ""
	for ev := range w.ResultChan() {
		n, ok := ev.Object.(*corev1.Node)
		if !ok || ev.Type == watch.Deleted {
			continue
		}
		var addrs, taints []string
		for _, a := range n.Status.Addresses {
			addrs = append(addrs, string(a.Type)+"="+a.Address)
		}
		for _, t := range n.Spec.Taints {
			taints = append(taints, t.Key)
		}
		line := fmt.Sprintf("NODE %s addresses=[%s] taints=[%s]", n.Name, strings.Join(addrs, " "), strings.Join(taints, " "))
		if line != last {
			fmt.Println(line)
			last = line
		}
	}
}
