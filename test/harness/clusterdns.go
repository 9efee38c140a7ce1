package harness

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Cluster DNS as kubeadm deploys it: CoreDNS behind the kube-dns Service at a fixed ClusterIP of
// the Service range, answering for ClusterDomain. The kubelet points pods at it when
// NodeOptions.ClusterDNS is ClusterDNSIP.
const (
	CoreDNSVersion = "v1.14.7"
	ClusterDNSIP   = "10.96.0.10"
	ClusterDomain  = "cluster.local"
	CoreDNSImage   = "nodeaddr.test/coredns:" + CoreDNSVersion
)

// BuildCoreDNS builds (once, cached by version) CoreDNS from the Go module proxy with only the
// plugins clusterCorefile uses (test/harness/testdata/coredns/main.go), static, and returns its path.
func BuildCoreDNS(progress io.Writer) (string, error) {
	src, err := os.ReadFile(filepath.Join(TestModuleDir(), "harness", "testdata", "coredns", "main.go"))
	if err != nil {
		return "", err
	}
	out := filepath.Join(CacheDir(), "bin", "coredns-"+CoreDNSVersion, "coredns")
	return out, buildFromProxy(progress, "coredns/"+CoreDNSVersion, out, proxyModule{
		name:     "coredns " + CoreDNSVersion,
		dir:      "coredns-" + CoreDNSVersion,
		module:   "nodeaddr.test/coredns",
		requires: []string{"github.com/coredns/coredns " + CoreDNSVersion},
		files:    map[string][]byte{"main.go": src},
		get:      coreDNSPackages(),
		pkg:      ".",
		flags:    []string{"-trimpath", "-ldflags=-s -w"},
	})
}

// coreDNSPackages are the packages testdata/coredns/main.go imports, at CoreDNSVersion: `go get`
// of each puts the checksums of everything they import into go.sum.
func coreDNSPackages() []string {
	var pkgs []string
	for _, p := range []string{"coremain", "plugin/cache", "plugin/errors", "plugin/health", "plugin/kubernetes",
		"plugin/loadbalance", "plugin/log", "plugin/ready"} {
		pkgs = append(pkgs, "github.com/coredns/coredns/"+p+"@"+CoreDNSVersion)
	}
	return pkgs
}

// WriteCoreDNSImage writes CoreDNSImage (the static binary as /coredns, run as root: it binds
// port 53) into dir and returns the tarball, for NodeOptions.Images.
func WriteCoreDNSImage(dir, binary string) (string, error) {
	p := filepath.Join(dir, "coredns.tar")
	return p, WriteImageFiles(p, CoreDNSImage, []ImageFile{{Path: "coredns", Source: binary, Mode: 0o755}},
		ImageConfig{Entrypoint: []string{"/coredns"}})
}

// clusterCorefile answers for the cluster's Services and pods and nothing else: no forward, there
// is nothing upstream to forward to.
const clusterCorefile = `.:53 {
    errors
    health :8080
    ready :8181
    kubernetes ` + ClusterDomain + ` in-addr.arpa ip6.arpa {
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
    }
    cache 30
    loadbalance
}
`

// DeployClusterDNS creates CoreDNS in kube-system (ServiceAccount and the read-only RBAC of the
// kubernetes plugin, the Corefile, a one-replica Deployment of CoreDNSImage, the kube-dns Service
// at ClusterDNSIP) and waits until it is ready. Its pod reaches the API server through the
// kubernetes Service: the node needs ServeKubernetesService and kube-proxy first.
func (c *NodeCluster) DeployClusterDNS() {
	t := c.T
	t.Helper()
	ctx := context.Background()
	cs := c.CP.Admin
	const ns, name = metav1.NamespaceSystem, "coredns"
	labels := map[string]string{"k8s-app": "kube-dns"}
	meta := metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels}
	check := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("cluster DNS: create %s: %v", what, err)
		}
	}
	_, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: meta}, metav1.CreateOptions{})
	check("ServiceAccount", err)
	_, err = cs.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "system:coredns"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"endpoints", "services", "pods", "namespaces"}, Verbs: []string{"list", "watch"}},
			{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"list", "watch"}},
		}}, metav1.CreateOptions{})
	check("ClusterRole", err)
	_, err = cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "system:coredns"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:coredns"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: ns}}}, metav1.CreateOptions{})
	check("ClusterRoleBinding", err)
	_, err = cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: meta, Data: map[string]string{"Corefile": clusterCorefile}}, metav1.CreateOptions{})
	check("ConfigMap", err)
	_, err = cs.AppsV1().Deployments(ns).Create(ctx, coreDNSDeployment(meta), metav1.CreateOptions{})
	check("Deployment", err)
	_, err = cs.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "kube-dns", Namespace: ns, Labels: labels},
		Spec: corev1.ServiceSpec{Selector: labels, ClusterIP: ClusterDNSIP, Ports: []corev1.ServicePort{
			{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromInt32(53)},
			{Name: "dns-tcp", Port: 53, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(53)},
		}}}, metav1.CreateOptions{})
	check("Service kube-dns", err)
	Eventually(t, 3*time.Minute, 200*time.Millisecond, "CoreDNS ready", func() (bool, string) {
		d, err := cs.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return d.Status.ReadyReplicas == 1, fmt.Sprintf("%d ready replicas", d.Status.ReadyReplicas)
	})
}

func coreDNSDeployment(meta metav1.ObjectMeta) *appsv1.Deployment {
	one := int32(1)
	probe := func(path string, port int32) *corev1.Probe {
		return &corev1.Probe{PeriodSeconds: 1, ProbeHandler: corev1.ProbeHandler{
			HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromInt32(port)}}}
	}
	return &appsv1.Deployment{ObjectMeta: meta, Spec: appsv1.DeploymentSpec{
		Replicas: &one,
		Selector: &metav1.LabelSelector{MatchLabels: meta.Labels},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: meta.Labels}, Spec: corev1.PodSpec{
			ServiceAccountName: meta.Name,
			DNSPolicy:          corev1.DNSDefault,
			Containers: []corev1.Container{{
				Name: "coredns", Image: CoreDNSImage, ImagePullPolicy: corev1.PullNever,
				Args:           []string{"-conf", "/etc/coredns/Corefile"},
				VolumeMounts:   []corev1.VolumeMount{{Name: "config", MountPath: "/etc/coredns", ReadOnly: true}},
				ReadinessProbe: probe("/ready", 8181),
				LivenessProbe:  probe("/health", 8080),
			}},
			Volumes: []corev1.Volume{{Name: "config", VolumeSource: corev1.VolumeSource{
				ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: meta.Name}}}}},
		}},
	}}
}

// MustBuildCoreDNS is BuildCoreDNS for tests.
func MustBuildCoreDNS(t testing.TB) string {
	t.Helper()
	return mustBuild(t, "build coredns", BuildCoreDNS)
}
