package csrapproval

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"testing"
	"time"
)

// servingCert is a kubelet serving certificate for ips, valid from notBefore for life.
func servingCert(t *testing.T, notBefore time.Time, life time.Duration, ips ...string) *x509.Certificate {
	t.Helper()
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(notBefore.UnixNano()), Subject: pkix.Name{CommonName: "system:node:node-a"},
		NotBefore: notBefore, NotAfter: notBefore.Add(life), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
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
	return cert
}

func TestJudgeCert(t *testing.T) {
	t0 := time.Date(2026, 12, 4, 8, 0, 0, 0, time.UTC)
	year := 365 * 24 * time.Hour
	both := addrs("10.0.0.5", "fd00::5")
	for _, tc := range []struct {
		name      string
		cert      *x509.Certificate
		published []netip.Addr
		now       time.Time
		want      CertState
	}{
		{"none read", nil, both, t0, CertUnknown},
		{"covers both families, fresh", servingCert(t, t0, year, "10.0.0.5", "fd00::5", "10.0.0.9"), both, t0.Add(time.Hour), CertCurrent},
		{"nothing published yet", servingCert(t, t0, year, "10.0.0.5"), nil, t0, CertCurrent},
		{"IPv4-mapped SAN matches", servingCert(t, t0, year, "::ffff:10.0.0.5", "fd00::5"), both, t0, CertCurrent},
		{"misses the new IPv6 address", servingCert(t, t0, year, "10.0.0.5"), both, t0, CertUncovered},
		{"misses the renumbered address", servingCert(t, t0, year, "10.0.0.4", "fd00::5"), both, t0, CertUncovered},
		{"uncovered wins over rotating", servingCert(t, t0, time.Hour, "10.0.0.4"), both, t0.Add(50 * time.Minute), CertUncovered},
		{"just before 70% of its life", servingCert(t, t0, 100*time.Hour, "10.0.0.5", "fd00::5"), both, t0.Add(70*time.Hour - time.Second), CertCurrent},
		{"at 70% of its life", servingCert(t, t0, 100*time.Hour, "10.0.0.5", "fd00::5"), both, t0.Add(70 * time.Hour), CertRotating},
		{"expired", servingCert(t, t0, time.Hour, "10.0.0.5", "fd00::5"), both, t0.Add(2 * time.Hour), CertRotating},
		{"no lifetime", servingCert(t, t0, 0, "10.0.0.5", "fd00::5"), both, t0, CertRotating},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := JudgeCert(tc.cert, tc.published, tc.now); got != tc.want {
				t.Errorf("JudgeCert = %s, want %s", got, tc.want)
			}
			if got := JudgeCert(tc.cert, tc.published, tc.now).ExpectsCSR(); got != (tc.want != CertCurrent) {
				t.Errorf("ExpectsCSR = %v", got)
			}
		})
	}
}

// TLSProbe reads the certificate a TLS server on loopback presents, at the port the Node's
// daemonEndpoints give, and fails with nothing listening there.
func TestTLSProbe(t *testing.T) {
	want := servingCert(t, time.Now().Add(-time.Minute), time.Hour, "127.0.0.1")
	srv := httptest.NewUnstartedServer(http.NotFoundHandler())
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{want.Raw}, PrivateKey: key}},
		ClientAuth: tls.VerifyClientCertIfGiven} // as the kubelet asks
	srv.StartTLS()
	_, port, err := net.SplitHostPort(srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	p, _ := strconv.Atoi(port)
	n := node("node-a")
	n.Status.DaemonEndpoints.KubeletEndpoint.Port = int32(p)
	got, err := TLSProbe(context.Background(), n, addrs("10.0.0.5"))
	if err != nil {
		t.Fatalf("TLSProbe: %v", err)
	}
	if !got.Equal(want) {
		t.Errorf("TLSProbe read serial %v, want %v", got.SerialNumber, want.SerialNumber)
	}
	srv.Close()
	if _, err := TLSProbe(context.Background(), n, nil); err == nil {
		t.Error("TLSProbe with nothing listening: no error")
	}
}

// The Node's daemonEndpoints give the kubelet's port; without them it is 10250.
func TestKubeletPort(t *testing.T) {
	n := node("node-a")
	if got := kubeletPort(n); got != DefaultKubeletPort {
		t.Errorf("no daemonEndpoints: port %d, want %d", got, DefaultKubeletPort)
	}
	if got := kubeletPort(nil); got != DefaultKubeletPort {
		t.Errorf("no Node yet: port %d, want %d", got, DefaultKubeletPort)
	}
	n.Status.DaemonEndpoints.KubeletEndpoint.Port = 10260
	if got := kubeletPort(n); got != 10260 {
		t.Errorf("daemonEndpoints 10260: port %d", got)
	}
}
