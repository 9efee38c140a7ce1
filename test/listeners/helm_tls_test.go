package listeners

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

// tlsValues are what docs/install-helm.md ("Your own /metrics certificate") tells a chart user to set.
const tlsValues = `config:
  tlsCertFile: /etc/nodeaddr/tls/tls.crt
  tlsPrivateKeyFile: /etc/nodeaddr/tls/tls.key
extraVolumes:
  - name: metrics-tls
    secret:
      secretName: nodeaddr-metrics-tls
extraVolumeMounts:
  - name: metrics-tls
    mountPath: /etc/nodeaddr/tls
    readOnly: true
`

// The /metrics serving certificate from a Secret: the chart renders the Secret volume and its mount
// next to the token's, the API server accepts the render, and the agent, run with the rendered
// arguments and the Secret's keys where the kubelet would mount them, serves /metrics with exactly
// that certificate to Prometheus' token.
func TestHelmMetricsCertificateFromSecret(t *testing.T) {
	harness.RequireE2E(t)
	valuesFile := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(valuesFile, []byte(tlsValues), 0o644); err != nil {
		t.Fatal(err)
	}
	rendered := harness.HelmTemplate(t, "-f", valuesFile)
	objs := harness.DecodeDocs(t, rendered)
	ds, ok := objs["DaemonSet/kube-system/nodeaddr"]
	if !ok {
		t.Fatal("no DaemonSet/kube-system/nodeaddr in the render")
	}
	pod := renderedPodSpec(t, ds)
	c, configMaps := harness.RenderedContainer(t, ds, objs)
	var volumes, mounts []string
	for _, v := range pod.Volumes {
		volumes = append(volumes, v.Name)
	}
	for _, m := range c.VolumeMounts {
		mounts = append(mounts, fmt.Sprintf("%s:%s:%t", m.Name, m.MountPath, m.ReadOnly))
	}
	if want := []string{"kube-api-access", "metrics-tls"}; !slices.Equal(volumes, want) {
		t.Errorf("volumes %v, want %v", volumes, want)
	}
	if want := []string{"kube-api-access:/var/run/secrets/kubernetes.io/serviceaccount:true", "metrics-tls:/etc/nodeaddr/tls:true"}; !slices.Equal(mounts, want) {
		t.Errorf("volume mounts %v, want %v", mounts, want)
	}

	const node = "worker-1"
	cert, certPEM, keyPEM := servingCert(t, "127.0.0.1", "192.0.2.10")
	cp, _ := harness.ApplyToAPIServer(t, harness.MustBuild(t).Kubectl, rendered, "helm")
	ctx := context.Background()
	if _, err := cp.Admin.CoreV1().Secrets("kube-system").Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "nodeaddr-metrics-tls"}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{corev1.TLSCertKey: certPEM, corev1.TLSPrivateKeyKey: keyPEM},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cp.CreateNode(t, harness.NodeSpec{Name: node, Taints: []corev1.Taint{harness.Uninitialized},
		Addresses: []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: node}}})

	env, args := harness.PodEnv(t, c, node, configMaps)
	args = mountSecrets(t, cp, pod, c, args)
	// The pod uses the in-cluster config (an empty --kubeconfig); here the pod's token comes in a
	// kubeconfig.
	args = slices.DeleteFunc(args, func(a string) bool { return a == "--kubeconfig=" })
	ns := harness.NewNetns(t, "tls")
	harness.DualStackUplink(ns, harness.NewNetns(t, "rtr"))
	a := harness.StartAgent(t, ns, harness.AgentOptions{Args: args, Env: env, Kubeconfig: cp.AgentKubeconfig(t, ns, node)})
	a.UseContainerPorts(c)
	a.WaitHTTP(t, a.ProbePort, c.ReadinessProbe.HTTPGet.Path)

	roots := x509.NewCertPool()
	roots.AddCert(cert)
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext:       func(ctx context.Context, _, addr string) (net.Conn, error) { return ns.Dial(ctx, addr) },
		TLSClientConfig:   &tls.Config{RootCAs: roots}, // verified: only the Secret's certificate passes
		DisableKeepAlives: true,
	}}
	req, err := http.NewRequest("GET", fmt.Sprintf("https://127.0.0.1:%d/metrics", a.MetricsPort), nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+harness.ScraperToken(t, cp))
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("/metrics with the Secret's certificate as the only root: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "nodeaddr_build_info") {
		t.Errorf("/metrics: %s, nodeaddr_build_info in body: %v", resp.Status, strings.Contains(string(body), "nodeaddr_build_info"))
	}
	if peer := resp.TLS.PeerCertificates; len(peer) == 0 || !peer[0].Equal(cert) {
		t.Errorf("the agent served another certificate than the Secret's")
	}
}

// renderedPodSpec is the pod template's spec of a rendered DaemonSet.
func renderedPodSpec(t *testing.T, ds harness.Object) corev1.PodSpec {
	t.Helper()
	raw, err := json.Marshal(ds["spec"].(harness.Object)["template"].(harness.Object)["spec"])
	if err != nil {
		t.Fatal(err)
	}
	var spec corev1.PodSpec
	if err := json.Unmarshal(raw, &spec); err != nil {
		t.Fatal(err)
	}
	return spec
}

// mountSecrets does what the kubelet does for the container's Secret volumes: it writes each key of
// the Secret, read from the API server, as a file (mode 0644, the default) in a directory standing
// for the mount path, and returns args with the mount paths pointing there.
func mountSecrets(t *testing.T, cp *harness.ControlPlane, pod corev1.PodSpec, c corev1.Container, args []string) []string {
	t.Helper()
	var pairs []string
	for _, m := range c.VolumeMounts {
		i := slices.IndexFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Name == m.Name })
		if i < 0 {
			t.Fatalf("mount %s names no volume of the pod", m.Name)
		}
		if pod.Volumes[i].Secret == nil {
			continue
		}
		s, err := cp.Admin.CoreV1().Secrets("kube-system").Get(context.Background(), pod.Volumes[i].Secret.SecretName, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("volume %s: %v", m.Name, err)
		}
		dir := harness.AgentDir(t)
		for k, v := range s.Data {
			if err := os.WriteFile(filepath.Join(dir, k), v, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		pairs = append(pairs, strings.TrimSuffix(m.MountPath, "/")+"/", dir+"/")
	}
	if len(pairs) == 0 {
		t.Fatal("the container mounts no Secret")
	}
	out := slices.Clone(args)
	for i, a := range out {
		if name, path, ok := strings.Cut(a, "="); ok {
			out[i] = name + "=" + strings.NewReplacer(pairs...).Replace(path)
		}
	}
	return out
}

// servingCert is a self-signed serving certificate for ips, and its PEM certificate and key.
func servingCert(t *testing.T, ips ...string) (*x509.Certificate, []byte, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "nodeaddr metrics (test)"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true, IsCA: true,
	}
	for _, ip := range ips {
		tmpl.IPAddresses = append(tmpl.IPAddresses, net.ParseIP(ip))
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
}
