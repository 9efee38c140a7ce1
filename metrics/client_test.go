package metrics

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/rest"
)

// A REST client's requests are counted on the agent's registry by code: a refusal by its status,
// an unreachable server as "<error>", the case the runbook tells apart.
func TestClientMetricsTellForbiddenFromUnreachable(t *testing.T) {
	m := New("test", "abc")
	m.RegisterClientMetrics()

	forbidden := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Forbidden","code":403}`))
	}))
	defer forbidden.Close()
	// A port nothing listens on: connection refused, no HTTP response.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "http://" + l.Addr().String()
	l.Close()

	get := func(host string) {
		cfg := &rest.Config{Host: host, APIPath: "/api", ContentConfig: rest.ContentConfig{
			GroupVersion: &schema.GroupVersion{Version: "v1"}, NegotiatedSerializer: serializer.NewCodecFactory(runtime.NewScheme()).WithoutConversion(),
		}}
		c, err := rest.RESTClientFor(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Get().Resource("nodes").Name("n1").Do(context.Background()).Error(); err == nil {
			t.Fatalf("GET %s succeeded", host)
		}
	}
	get(forbidden.URL)
	get(down)

	forbiddenHost := strings.TrimPrefix(forbidden.URL, "http://")
	downHost := strings.TrimPrefix(down, "http://")
	requests := func(code, host string) float64 {
		return sample(t, m.Registry, "rest_client_requests_total", map[string]string{"code": code, "method": "GET", "host": host})
	}
	if got := requests("403", forbiddenHost); got != 1 {
		t.Errorf(`rest_client_requests_total{code="403"} = %v, want 1`, got)
	}
	if got := requests("<error>", downHost); got < 1 {
		t.Errorf(`rest_client_requests_total{code="<error>"} = %v, want at least 1`, got)
	}
	for _, host := range []string{forbiddenHost, downHost} {
		if n := sample(t, m.Registry, "rest_client_request_duration_seconds", map[string]string{"verb": "GET", "host": host}); n < 1 {
			t.Errorf("rest_client_request_duration_seconds{host=%q}: %v observations, want at least 1", host, n)
		}
	}
}

// sample is the value of the series of name with exactly labels in reg (a histogram's sample
// count), 0 when absent.
func sample(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			if len(m.GetLabel()) != len(labels) {
				continue
			}
			for _, l := range m.GetLabel() {
				if labels[l.GetName()] != l.GetValue() {
					continue series
				}
			}
			if h := m.GetHistogram(); h != nil {
				return float64(h.GetSampleCount())
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}
