// Scraping an agent's /metrics as Prometheus does: its ServiceAccount, bound to
// deploy/monitoring/rbac.yaml's reader role, and its token for the audience nodeaddr.
package harness

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ScraperAudience is the audience of the token Prometheus' projected volume holds
// (--metrics-token-audience's default; docs/metrics.md, "Scraper tokens").
const ScraperAudience = "nodeaddr"

// ScraperSA is kube-prometheus' Prometheus ServiceAccount in `monitoring`, which the shipped
// ConfigMap's metrics-allowed-scrapers lists.
const ScraperSA = "prometheus-k8s"

// ScraperToken applies deploy/monitoring/rbac.yaml (the nodeaddr-metrics-reader ClusterRole), binds
// it to the ServiceAccount monitoring/prometheus-k8s (listed in the ConfigMap), as an operator does
// for their Prometheus, and returns a token of that ServiceAccount for the audience nodeaddr, as
// the projected volume in Prometheus' pod holds.
func ScraperToken(t *testing.T, cp *ControlPlane) string {
	t.Helper()
	ctx := context.Background()
	if err := cp.ApplyManifest(ctx, DeployFile("monitoring", "rbac.yaml")); err != nil {
		t.Fatal(err)
	}
	return CreateServiceAccountToken(t, cp, "monitoring", ScraperSA, "nodeaddr-metrics-reader", ScraperAudience)
}

// CreateServiceAccountToken creates namespace/name (bound to clusterRole unless empty) and returns
// a token for audiences (none: the API server's own).
func CreateServiceAccountToken(t *testing.T, cp *ControlPlane, namespace, name, clusterRole string, audiences ...string) string {
	t.Helper()
	ctx := context.Background()
	if _, err := cp.Admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	if _, err := cp.Admin.CoreV1().ServiceAccounts(namespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	if clusterRole != "" {
		if _, err := cp.Admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: namespace + "-" + name + "-" + clusterRole},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: clusterRole},
			Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: namespace}},
		}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	tr, err := cp.Admin.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name,
		&authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{Audiences: audiences}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// Scrape GETs https://addr/metrics from inside ns with token ("" for none) on a new connection,
// skipping certificate verification as the ServiceMonitor does.
func Scrape(ns *Netns, addr, token string) (int, string, error) {
	return ScrapeWith(ScraperClient(ns, true), addr, token)
}

// ScraperClient is Prometheus' HTTP client in ns: TLS without verification (the ServiceMonitor's
// insecureSkipVerify), the ServiceMonitor's 10 s scrape timeout, and keep-alive unless fresh.
func ScraperClient(ns *Netns, fresh bool) *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext:       func(ctx context.Context, _, a string) (net.Conn, error) { return ns.Dial(ctx, a) },
		TLSClientConfig:   &tls.Config{InsecureSkipVerify: true},
		DisableKeepAlives: fresh,
		IdleConnTimeout:   90 * time.Second,
	}}
}

// ScrapeWith GETs https://addr/metrics with hc and token ("" for none) and returns the status and
// body.
func ScrapeWith(hc *http.Client, addr, token string) (int, string, error) {
	req, err := http.NewRequest("GET", "https://"+addr+"/metrics", nil)
	if err != nil {
		return 0, "", err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}
