package metrics

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
)

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func startServer(t *testing.T, s *Server) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	wait, err := s.Listen(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		if err := wait(); err != nil {
			t.Error(err)
		}
	})
}

// hugeHeaderStatus sends a request with a 1 MiB header on c and returns the response's status line.
// The request is written concurrently: the server answers before it has read it all.
func hugeHeaderStatus(t *testing.T, c net.Conn) string {
	t.Helper()
	defer c.Close()
	go func() {
		fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: %s\r\n\r\n", strings.Repeat("a", 1<<20))
	}()
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		t.Fatalf("reading the response to a 1 MiB header: %v", err)
	}
	return strings.TrimSpace(line)
}

// A 1 MiB header is refused with 431 on the probe listener and on the TLS metrics listener.
func TestServerRefusesHugeHeaders(t *testing.T) {
	tlsCfg, err := SelfSignedTLS("node-1")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{MetricsAddr: freeAddr(t), ProbeAddr: freeAddr(t), Metrics: New("test", "abc"), MetricsTLS: tlsCfg,
		MetricsAuth: NewAuthFilter(AuthConfig{Reviewer: reviewer()})}
	startServer(t, s)
	c, err := net.Dial("tcp", s.ProbeAddr)
	if err != nil {
		t.Fatal(err)
	}
	if got := hugeHeaderStatus(t, c); !strings.Contains(got, " 431 ") {
		t.Errorf("probe listener: %q, want 431", got)
	}
	tc, err := tls.Dial("tcp", s.MetricsAddr, &tls.Config{InsecureSkipVerify: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := hugeHeaderStatus(t, tc); !strings.Contains(got, " 431 ") {
		t.Errorf("metrics listener: %q, want 431", got)
	}
	// A plain HTTP request to the TLS listener gets no metrics.
	resp, err := http.Get("http://" + s.MetricsAddr + "/metrics")
	if err == nil {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.Contains(string(body), "nodeaddr_build_info") {
			t.Errorf("plain HTTP to the secure listener returned metrics")
		}
	}
}

// Secure metrics: a scraper with a token gets them over TLS, without one gets 401.
func TestServerSecureMetrics(t *testing.T) {
	tlsCfg, err := SelfSignedTLS("node-1")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{MetricsAddr: freeAddr(t), ProbeAddr: freeAddr(t), Metrics: New("test", "abc"), MetricsTLS: tlsCfg,
		MetricsAuth: NewAuthFilter(AuthConfig{Reviewer: reviewer(), Registry: nil})}
	startServer(t, s)
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	for token, want := range map[string]int{"": 401, "other-token": 403, "prom-token": 200} {
		req, _ := http.NewRequest("GET", "https://"+s.MetricsAddr+"/metrics", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want || (want == 200) != strings.Contains(string(body), "nodeaddr_build_info") {
			t.Errorf("token %q: %d, want %d; metrics in body: %v", token, resp.StatusCode, want, strings.Contains(string(body), "nodeaddr_build_info"))
		}
	}
	resp, err := http.Get("http://" + s.ProbeAddr + "/healthz")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("probe: %v %v", resp, err)
	}
	resp.Body.Close()
}

func TestServerRefusesProbesOnSecureMetricsAddress(t *testing.T) {
	tlsCfg, _ := SelfSignedTLS()
	addr := freeAddr(t)
	s := &Server{MetricsAddr: addr, ProbeAddr: addr, Metrics: New("test", "abc"), MetricsTLS: tlsCfg}
	if _, err := s.Listen(context.Background()); err == nil {
		t.Fatal("probes and TLS metrics on one address: no error")
	}
}
