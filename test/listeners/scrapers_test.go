package listeners

import (
	"context"
	"testing"

	authzv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

// No SubjectAccessReviews: the shipped agent authorizes scrapers by the ConfigMap's
// metrics-allowed-scrapers, so its RBAC grants no SubjectAccessReviews and its token cannot ask the
// API server who may do what. The listed Prometheus is served; another ServiceAccount, even one
// bound to nodeaddr-metrics-reader, gets 403; the agent sent TokenReviews only.
func TestAgentAsksNoSubjectAccessReview(t *testing.T) {
	harness.RequireE2E(t)
	s := startListenerSite(t)
	ctx := context.Background()
	prom := harness.ScraperClient(s.prom, true)

	if code, body, err := harness.ScrapeWith(prom, s.metricsAddr, harness.ScraperToken(t, s.cp)); err != nil || code != 200 || !containsMetric(body) {
		t.Errorf("the listed Prometheus (monitoring/%s): %d %v, want 200 with metrics", harness.ScraperSA, code, err)
	}
	other := harness.CreateServiceAccountToken(t, s.cp, "monitoring", "grafana-agent", "nodeaddr-metrics-reader", harness.ScraperAudience)
	if code, body, err := harness.ScrapeWith(prom, s.metricsAddr, other); err != nil || code != 403 || containsMetric(body) {
		t.Errorf("a ServiceAccount bound to nodeaddr-metrics-reader but not listed: %d %v, want 403 without metrics", code, err)
	}
	if tr, sar := reviews(t, s.cp); tr < 2 || sar != 0 {
		t.Errorf("the agent sent %d TokenReviews and %d SubjectAccessReviews, want ≥ 2 and 0", tr, sar)
	}

	// The agent's own token cannot ask the oracle question (may kube-system:default list Secrets?).
	oracle := &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{User: "system:serviceaccount:kube-system:default",
		ResourceAttributes: &authzv1.ResourceAttributes{Namespace: "kube-system", Verb: "list", Resource: "secrets"}}}
	_, err := harness.AgentClient(t, s.cp, "worker-1").AuthorizationV1().SubjectAccessReviews().Create(ctx, oracle, metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) {
		t.Errorf("the agent's SubjectAccessReview: %v, want 403 Forbidden (no RBAC for it)", err)
	}
}
