package kube

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/reference"
)

// TestKubeClient checks the requests the REST client makes (paths, query, content types) and that
// it decodes answers, including a watch stream, with its small scheme.
func TestKubeClient(t *testing.T) {
	node := `{"kind":"Node","apiVersion":"v1","metadata":{"name":"n1","resourceVersion":"7"}}`
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, r.Method+" "+r.URL.Path+"?"+r.URL.RawQuery+" "+r.Header.Get("Content-Type")+" "+string(body))
		mu.Unlock()
		if !strings.Contains(r.Header.Get("Accept"), "application/json") {
			t.Errorf("%s %s: Accept %q", r.Method, r.URL, r.Header.Get("Accept"))
		}
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.URL.Query().Get("watch") == "true":
			ev := func(typ, obj string) { w.Write([]byte(`{"type":"` + typ + `","object":` + obj + "}\n")) }
			ev("ADDED", node)
			ev("BOOKMARK", `{"kind":"Node","apiVersion":"v1","metadata":{"resourceVersion":"8"}}`)
		case r.URL.Path == "/api/v1/nodes":
			w.Write([]byte(`{"kind":"NodeList","apiVersion":"v1","metadata":{"resourceVersion":"7"},"items":[` + node + `]}`))
		case strings.HasPrefix(r.URL.Path, "/api/v1/nodes/n1"):
			w.Write([]byte(node))
		case r.URL.Path == "/api/v1/nodes/missing":
			w.WriteHeader(http.StatusNotFound)
			w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`))
		case strings.HasPrefix(r.URL.Path, "/api/v1/namespaces/default/events"):
			w.Write(body)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	scheme := Scheme()
	k, err := NewClient(&rest.Config{Host: srv.URL, UserAgent: "test"}, scheme)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()

	n, err := k.Get(ctx, "n1", metav1.GetOptions{})
	if err != nil || n.Name != "n1" || n.ResourceVersion != "7" {
		t.Fatalf("Get = %+v, %v", n, err)
	}
	if _, err := k.Get(ctx, "missing", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("Get missing: err = %v, want not found", err)
	}
	sel := fields.OneTermEqualSelector("metadata.name", "n1").String()
	l, err := k.List(ctx, metav1.ListOptions{FieldSelector: sel, ResourceVersion: "0"})
	if err != nil || len(l.Items) != 1 || l.Items[0].Name != "n1" {
		t.Fatalf("List = %+v, %v", l, err)
	}
	w, err := k.Watch(ctx, metav1.ListOptions{FieldSelector: sel, AllowWatchBookmarks: true})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var evs []string
	for ev := range w.ResultChan() {
		if st, ok := ev.Object.(*metav1.Status); ok {
			t.Fatalf("watch: %s %+v", ev.Type, st)
		}
		evs = append(evs, string(ev.Type)+" "+ev.Object.(*corev1.Node).ResourceVersion)
		if ev.Type == watch.Bookmark {
			break
		}
	}
	if strings.Join(evs, ",") != "ADDED 7,BOOKMARK 8" {
		t.Errorf("watch events %v", evs)
	}
	if _, err := k.Patch(ctx, "n1", types.JSONPatchType, []byte(`[]`), metav1.PatchOptions{FieldManager: "nodeaddr"}, "status"); err != nil {
		t.Fatal(err)
	}

	// The recorder needs the scheme to name a Node that came without TypeMeta.
	ref, err := reference.GetReference(scheme, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "u"}})
	if err != nil || ref.Kind != "Node" || ref.APIVersion != "v1" {
		t.Fatalf("reference = %+v, %v", ref, err)
	}
	ev := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "n1.1", Namespace: "default"}, InvolvedObject: *ref, Reason: "R"}
	sink := k.EventSink()
	if out, err := sink.Create(ev); err != nil || out.Reason != "R" {
		t.Fatalf("Create = %+v, %v", out, err)
	}
	if _, err := sink.Update(ev); err != nil {
		t.Fatal(err)
	}
	if _, err := sink.Patch(ev, []byte(`{"count":2}`)); err != nil {
		t.Fatal(err)
	}

	want := []string{
		"GET /api/v1/nodes/n1? ",
		"GET /api/v1/nodes/missing? ",
		"GET /api/v1/nodes?fieldSelector=metadata.name%3Dn1&resourceVersion=0 ",
		"GET /api/v1/nodes?allowWatchBookmarks=true&fieldSelector=metadata.name%3Dn1&watch=true ",
		"PATCH /api/v1/nodes/n1/status?fieldManager=nodeaddr application/json-patch+json []",
		"POST /api/v1/namespaces/default/events? application/json ",
		"PUT /api/v1/namespaces/default/events/n1.1? application/json ",
		"PATCH /api/v1/namespaces/default/events/n1.1? application/strategic-merge-patch+json {\"count\":2}",
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != len(want) {
		t.Fatalf("requests:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("request %d: %q, want prefix %q", i, got[i], want[i])
		}
	}
	var sent corev1.Event
	if err := json.Unmarshal([]byte(got[5][strings.Index(got[5], "{"):]), &sent); err != nil || sent.InvolvedObject.Kind != "Node" {
		t.Errorf("event body %q: %v", got[5], err)
	}
}

// TestPatchReturnsRetryAfter: a PATCH that the server rejects with Retry-After (priority and
// fairness's 429, or a 5xx) comes back to the caller at once, with the server's delay in the
// error, instead of being retried by client-go after exactly that delay (publisher/retry.go
// spreads the retries).
func TestPatchReturnsRetryAfter(t *testing.T) {
	for _, tc := range []struct {
		code int
		is   func(error) bool
	}{
		{http.StatusTooManyRequests, apierrors.IsTooManyRequests},
		{http.StatusServiceUnavailable, apierrors.IsServiceUnavailable},
	} {
		t.Run(http.StatusText(tc.code), func(t *testing.T) {
			var mu sync.Mutex
			var got []string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				got = append(got, r.Method+" "+r.URL.Path)
				mu.Unlock()
				w.Header().Set("Retry-After", "1")
				http.Error(w, "Too many requests, please try again later.", tc.code)
			}))
			defer srv.Close()
			k, err := NewClient(&rest.Config{Host: srv.URL, UserAgent: "test"}, Scheme())
			if err != nil {
				t.Fatal(err)
			}
			_, err = k.Patch(t.Context(), "n1", types.JSONPatchType, []byte(`[]`), metav1.PatchOptions{}, "status")
			if !tc.is(err) {
				t.Fatalf("Patch: err = %v, want %d", err, tc.code)
			}
			if s, ok := apierrors.SuggestsClientDelay(err); !ok || s != 1 {
				t.Errorf("SuggestsClientDelay = %d, %v; want the server's 1 s", s, ok)
			}
			mu.Lock()
			defer mu.Unlock()
			if want := []string{"PATCH /api/v1/nodes/n1/status"}; !slices.Equal(got, want) {
				t.Errorf("requests %q, want %q: client-go retried the Retry-After itself", got, want)
			}
		})
	}
}

// TestClientUserAgent: the requests carry the configured User-Agent, or client-go's default when
// the configuration has none (never Go's own).
func TestClientUserAgent(t *testing.T) {
	for _, tc := range []struct{ set, wantPrefix string }{
		{"nodeaddr/v1.2.3", "nodeaddr/v1.2.3"},
		{"", strings.SplitN(rest.DefaultKubernetesUserAgent(), " ", 2)[0]},
	} {
		var got string
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			got = r.UserAgent()
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"kind":"Node","apiVersion":"v1","metadata":{"name":"n1"}}`))
		}))
		k, err := NewClient(&rest.Config{Host: srv.URL, UserAgent: tc.set}, Scheme())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := k.Get(t.Context(), "n1", metav1.GetOptions{}); err != nil {
			t.Fatal(err)
		}
		srv.Close()
		if !strings.HasPrefix(got, tc.wantPrefix) || strings.HasPrefix(got, "Go-http-client") {
			t.Errorf("UserAgent %q set: request carried %q, want prefix %q", tc.set, got, tc.wantPrefix)
		}
	}
}

// ServiceNetwork reads the ServiceCIDRs and the kubernetes Service's ClusterIPs; an API server
// without ServiceCIDRs (404) leaves the ClusterIPs.
func TestServiceNetwork(t *testing.T) {
	for _, tc := range []struct {
		name   string
		cidrs  bool
		want   string
		errHas string
	}{
		{"ServiceCIDR objects", true, "[10.96.0.0/12 fd00:96::/108 10.96.0.1/32 fd00:96::1/128]", ""},
		{"no ServiceCIDR objects", false, "[10.96.0.1/32 fd00:96::1/128]", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				switch {
				case r.URL.Path == "/apis/networking.k8s.io/v1/servicecidrs" && tc.cidrs:
					w.Write([]byte(`{"kind":"ServiceCIDRList","apiVersion":"networking.k8s.io/v1","items":[{"metadata":{"name":"kubernetes"},"spec":{"cidrs":["10.96.0.0/12","fd00:96::/108"]}}]}`))
				case r.URL.Path == "/api/v1/namespaces/default/services/kubernetes":
					w.Write([]byte(`{"kind":"Service","apiVersion":"v1","metadata":{"name":"kubernetes"},"spec":{"clusterIP":"10.96.0.1","clusterIPs":["10.96.0.1","fd00:96::1"]}}`))
				default:
					w.WriteHeader(http.StatusNotFound)
					w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`))
				}
			}))
			defer srv.Close()
			c, err := NewClient(&rest.Config{Host: srv.URL}, Scheme())
			if err != nil {
				t.Fatal(err)
			}
			got, err := c.ServiceNetwork(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			// The ClusterIP appears in both clusterIP and clusterIPs: the caller dedupes.
			if s := fmt.Sprint(slices.Compact(got)); s != tc.want {
				t.Fatalf("ServiceNetwork = %s, want %s", s, tc.want)
			}
		})
	}
}
