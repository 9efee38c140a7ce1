package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The unit tests run the plugin against an HTTP stand-in for the API server that answers GETs from
// fixed objects (selectors ignored: the fixtures have one agent pod per Node), so that the whole
// path is real: the kubeconfig, client-go's transport and its -v logging, the decoding of API
// errors and the exit codes. test/plugin runs the same against a real kube-apiserver.

// scene is node-a, renumbered from 10.0.0.12 to 10.0.0.2 with its agent pod (hostNetwork) still on
// 10.0.0.12 and an explanation in the agent's log; node-b, current, with its agent on 10.0.0.3; and
// node-c with no address and no agent.
func scene() []any {
	node := func(name, ip string) *corev1.Node {
		return &corev1.Node{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Node"}, ObjectMeta: metav1.ObjectMeta{Name: name},
			Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}}}}
	}
	agent := func(name, node, ip string) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: name, Labels: map[string]string{"app.kubernetes.io/name": "nodeaddr"}},
			Spec: corev1.PodSpec{NodeName: node, HostNetwork: true, Containers: []corev1.Container{{Name: "nodeaddr", Image: "ghcr.io/nodeaddr/nodeaddr:0.2.0"}}},
			Status: corev1.PodStatus{PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}}, Phase: corev1.PodRunning,
				Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}}
	}
	nodeC := node("node-c", "")
	nodeC.Status.Addresses = nil
	explain := `[{"type":"InternalIP","family":"IPv4","address":"10.0.0.2","from":"route to 8.8.8.8","chosen":true,"reason":"chosen"},` +
		`{"type":"InternalIP","family":"IPv6","chosen":false,"reason":"no target of this family: not published"}]`
	return []any{node("node-a", "10.0.0.2"), node("node-b", "10.0.0.3"), nodeC,
		agent("nodeaddr-a", "node-a", "10.0.0.12"), agent("nodeaddr-b", "node-b", "10.0.0.3"),
		podLog{"kube-system", "nodeaddr-a", fmt.Sprintf("time=2026-12-04T08:10:00.000Z level=INFO msg=%q node=node-a state=%q explain=%q\n",
			"addresses explained", "[InternalIP=10.0.0.2]", explain)}}
}

// podLog is the log of a pod, for GET …/pods/NAME/log.
type podLog struct{ namespace, name, text string }

// startAPI serves objects (*corev1.Node, corev1.Pod, podLog, *certificatesv1.CertificateSigningRequest,
// *appsv1.Deployment) as lists, Nodes one by one and pod
// logs; any other path is NotFound.
func startAPI(t *testing.T, objects ...any) *httptest.Server {
	t.Helper()
	return startForbidding(t, "", objects...)
}

// startForbidding is startAPI that answers the list of resource ("*": every request) as the API
// server answers a user without the right to it.
func startForbidding(t *testing.T, resource string, objects ...any) *httptest.Server {
	t.Helper()
	nodes := &corev1.NodeList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "NodeList"}}
	pods := &corev1.PodList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PodList"}}
	deps := &appsv1.DeploymentList{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "DeploymentList"}}
	csrs := &certificatesv1.CertificateSigningRequestList{TypeMeta: metav1.TypeMeta{APIVersion: "certificates.k8s.io/v1", Kind: "CertificateSigningRequestList"}}
	routes := map[string]any{
		"/api/v1/nodes":  nodes,
		"/api/v1/pods":   pods,
		"/api/v1/events": &corev1.EventList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "EventList"}},
		"/apis/discovery.k8s.io/v1/endpointslices": &discoveryv1.EndpointSliceList{
			TypeMeta: metav1.TypeMeta{APIVersion: "discovery.k8s.io/v1", Kind: "EndpointSliceList"}},
		"/apis/certificates.k8s.io/v1/certificatesigningrequests": csrs,
		"/apis/apps/v1/deployments":                               deps,
	}
	for _, o := range objects {
		switch o := o.(type) {
		case *corev1.Node:
			nodes.Items = append(nodes.Items, *o)
			routes["/api/v1/nodes/"+o.Name] = o
		case corev1.Pod:
			pods.Items = append(pods.Items, o)
		case *certificatesv1.CertificateSigningRequest:
			csrs.Items = append(csrs.Items, *o)
		case *appsv1.Deployment:
			deps.Items = append(deps.Items, *o)
		case podLog:
			routes["/api/v1/namespaces/"+o.namespace+"/pods/"+o.name+"/log"] = o
		default:
			t.Fatalf("startAPI: %T", o)
		}
	}
	return startServer(t, func(w http.ResponseWriter, r *http.Request) {
		if resource == "*" || resource != "" && strings.HasSuffix(r.URL.Path, "/"+resource) {
			what := resource
			if what == "*" {
				what = "nodes"
			}
			writeJSON(w, http.StatusForbidden, &metav1.Status{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Status"}, Status: metav1.StatusFailure,
				Reason: metav1.StatusReasonForbidden, Code: http.StatusForbidden,
				Message: fmt.Sprintf(`%s is forbidden: User "nobody" cannot list resource %q in API group "" at the cluster scope`, what, what)})
			return
		}
		obj, ok := routes[r.URL.Path]
		if log, isLog := obj.(podLog); isLog && r.Method == http.MethodGet {
			w.Header().Set("Content-Type", "text/plain")
			_, _ = w.Write([]byte(log.text))
			return
		}
		if ok && r.Method == http.MethodGet {
			writeJSON(w, http.StatusOK, obj)
			return
		}
		writeJSON(w, http.StatusNotFound, &metav1.Status{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Status"}, Status: metav1.StatusFailure,
			Reason: metav1.StatusReasonNotFound, Code: http.StatusNotFound, Message: fmt.Sprintf("the server could not find %s", r.URL.Path)})
	})
}

func startServer(t *testing.T, h http.HandlerFunc) *httptest.Server {
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	return s
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// kubeconfig writes a kubeconfig for server (no credentials) and returns its path.
func kubeconfig(t *testing.T, server string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "kubeconfig")
	data := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: test
  cluster: {server: %q}
users:
- name: test
  user: {}
contexts:
- name: test
  context: {cluster: test, user: test}
current-context: test
`, server)
	if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// runPlugin runs the plugin's command line and returns stdout, stderr and the exit code.
func runPlugin(args ...string) (string, string, int) {
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), args, &stdout, &stderr)
	return stdout.String(), stderr.String(), code
}
