package csrapproval

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
)

// fakeDiscovery stands in for the API server's networking.k8s.io/v1 discovery: answer(n) is the
// status of the n-th request (0: serve the list, with ServiceCIDRs).
func fakeDiscovery(t *testing.T, answer func(n int32) int) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/apis/networking.k8s.io/v1" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if code := answer(n.Add(1)); code != 0 {
			st := apierrors.NewGenericServerResponse(code, "get", schema.GroupResource{}, "", "refused by the test", 0, false).ErrStatus
			w.WriteHeader(code)
			_ = json.NewEncoder(w).Encode(&st)
			return
		}
		_ = json.NewEncoder(w).Encode(&metav1.APIResourceList{GroupVersion: "networking.k8s.io/v1",
			APIResources: []metav1.APIResource{{Name: "servicecidrs", Kind: "ServiceCIDR"}}})
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

// unreachable is an HTTP client whose first n dials fail as on a node before kube-proxy programs
// the `kubernetes` Service's ClusterIP: connect: network is unreachable.
func unreachable(n int32) (*http.Client, *atomic.Int32) {
	var dials atomic.Int32
	tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		if dials.Add(1) <= n {
			return nil, &net.OpError{Op: "dial", Net: network, Err: os.NewSyscallError("connect", syscall.ENETUNREACH)}
		}
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}}
	return &http.Client{Transport: tr}, &dials
}

func testAPI(t *testing.T, srv *httptest.Server, hc *http.Client) *API {
	t.Helper()
	a, err := NewAPI(&rest.Config{Host: srv.URL}, hc)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// warnings returns the WARN lines of a text log.
func warnings(log string) []string {
	var w []string
	for line := range strings.Lines(log) {
		if strings.Contains(line, "level=WARN") {
			w = append(w, line)
		}
	}
	return w
}

// WaitSource waits for an API server that cannot answer yet (unreachable, or 503), logging each
// failure once at WARN with the next delay (200 ms, doubling), then returns its Source; one that
// refuses the approver (401, 403) fails at once.
func TestWaitSource(t *testing.T) {
	for _, tc := range []struct {
		name      string
		status    func(n int32) int // of the n-th discovery request that reaches the server
		dialFails int32
		want      string // in the first WARN
	}{
		{name: "network unreachable", status: func(int32) int { return 0 }, dialFails: 2, want: "connect: network is unreachable"},
		{name: "503", status: func(n int32) int { return map[bool]int{true: http.StatusServiceUnavailable}[n <= 2] }, want: "the server is currently unable to handle the request"},
		{name: "429 then 500", status: func(n int32) int {
			return map[int32]int{1: http.StatusTooManyRequests, 2: http.StatusInternalServerError}[n]
		}, want: "too many requests"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, reqs := fakeDiscovery(t, tc.status)
			hc, dials := unreachable(tc.dialFails)
			var log bytes.Buffer
			start := time.Now()
			src, err := testAPI(t, srv, hc).WaitSource(t.Context(), slog.New(slog.NewTextHandler(&log, nil)))
			if err != nil || src.ServiceCIDRs == nil || src.CSRs == nil {
				t.Fatalf("err %v, ServiceCIDRs %v; want a Source with ServiceCIDRs\n%s", err, src.ServiceCIDRs, log.String())
			}
			if attempts := reqs.Load() + min(dials.Load(), tc.dialFails); attempts != 3 {
				t.Errorf("%d attempts, want 3", attempts)
			}
			w := warnings(log.String())
			if len(w) != 2 || !strings.Contains(w[0], tc.want) || !strings.Contains(w[0], "retry_in=200ms") || !strings.Contains(w[1], "retry_in=400ms") {
				t.Errorf("log:\n%s\nwant two WARNs naming %q, retry_in=200ms then 400ms", log.String(), tc.want)
			}
			if d := time.Since(start); d < 600*time.Millisecond {
				t.Errorf("returned after %s, before its delays (600ms)", d)
			}
		})
	}

	for _, code := range []int{http.StatusForbidden, http.StatusUnauthorized} {
		t.Run(fmt.Sprint(code), func(t *testing.T) {
			srv, reqs := fakeDiscovery(t, func(int32) int { return code })
			var log bytes.Buffer
			_, err := testAPI(t, srv, nil).WaitSource(t.Context(), slog.New(slog.NewTextHandler(&log, nil)))
			if !apierrors.IsForbidden(err) && !apierrors.IsUnauthorized(err) || reqs.Load() != 1 || log.Len() != 0 {
				t.Errorf("err %v after %d requests, log %q; want the refusal at once, unlogged", err, reqs.Load(), log.String())
			}
			if !strings.HasPrefix(err.Error(), "discover networking.k8s.io/v1: ") {
				t.Errorf("err %q, want Source's", err)
			}
		})
	}

	t.Run("context ends", func(t *testing.T) {
		srv, _ := fakeDiscovery(t, func(int32) int { return http.StatusServiceUnavailable })
		ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
		defer cancel()
		_, err := testAPI(t, srv, nil).WaitSource(ctx, slog.New(slog.NewTextHandler(io.Discard, nil)))
		if !apierrors.IsServiceUnavailable(err) || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("err %v, want the last failure and the context's end", err)
		}
	})
}

func TestTransient(t *testing.T) {
	gr := schema.GroupResource{Group: "networking.k8s.io"}
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{&net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}, true},
		{fmt.Errorf("wrapped: %w", &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.EHOSTUNREACH)}), true},
		{&net.DNSError{Err: "no such host", Name: "api.example", IsNotFound: true}, true},
		{io.ErrUnexpectedEOF, true},
		{context.DeadlineExceeded, true},
		{apierrors.NewServiceUnavailable("starting"), true},
		{apierrors.NewTooManyRequests("slow down", 1), true},
		{apierrors.NewInternalError(errors.New("etcd")), true},
		{apierrors.NewTimeoutError("slow", 1), true},
		{apierrors.NewGenericServerResponse(http.StatusBadGateway, "get", gr, "", "", 0, false), true},
		{apierrors.NewForbidden(gr, "", errors.New("no")), false},
		{apierrors.NewUnauthorized("no"), false},
		{apierrors.NewBadRequest("no"), false},
		{&net.OpError{Op: "remote error", Err: errors.New("tls: bad certificate")}, false},
		{errors.New("x509: certificate signed by unknown authority"), false},
		{nil, false},
	} {
		if got := Transient(tc.err); got != tc.want {
			t.Errorf("Transient(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
