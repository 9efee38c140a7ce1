package rehearsal

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

// registry is a real container registry (distribution) serving HTTPS on loopback with a
// certificate of a test CA: every client must trust the CA (SSL_CERT_FILE), as with a private
// registry, and none may fall back to plain HTTP.
type registry struct {
	Host   string // 127.0.0.1:PORT
	CAFile string
	Client *http.Client
}

// startRegistry starts the registry binary in dir; it stops when t ends.
func startRegistry(t *testing.T, bin, dir string) *registry {
	t.Helper()
	port, err := harness.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	r := &registry{Host: fmt.Sprintf("127.0.0.1:%d", port), CAFile: filepath.Join(dir, "ca.pem")}
	certFile, keyFile := filepath.Join(dir, "registry.pem"), filepath.Join(dir, "registry-key.pem")
	pool := writeTLS(t, r.CAFile, certFile, keyFile)
	r.Client = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	cfg := filepath.Join(dir, "config.yml")
	writeFile(t, cfg, fmt.Sprintf(`version: 0.1
log:
  level: warn
storage:
  filesystem:
    rootdirectory: %s
  delete:
    enabled: true
http:
  addr: %s
  tls:
    certificate: %s
    key: %s
`, filepath.Join(dir, "storage"), r.Host, certFile, keyFile))
	logFile, err := os.Create(filepath.Join(dir, "registry.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "serve", cfg)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// distribution exports OpenTelemetry traces to localhost:4318 unless told not to.
	cmd.Env = append(os.Environ(), "OTEL_TRACES_EXPORTER=none")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
		logFile.Close()
		if t.Failed() {
			log, _ := os.ReadFile(logFile.Name())
			t.Logf("registry log:\n%s", tail(string(log), 4000))
		}
	})
	harness.Eventually(t, 30*time.Second, 100*time.Millisecond, "registry ready on "+r.Host, func() (bool, string) {
		resp, err := r.Client.Get("https://" + r.Host + "/v2/")
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, resp.Status
	})
	return r
}

// writeTLS writes a CA and a server certificate for 127.0.0.1 signed by it; it returns the CA pool.
func writeTLS(t *testing.T, caFile, certFile, keyFile string) *x509.CertPool {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	ca := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "nodeaddr release rehearsal CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	leaf := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, leaf, caCert, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, caFile, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})))
	writeFile(t, certFile, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})))
	writeFile(t, keyFile, string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})))
	pool := x509.NewCertPool()
	pool.AddCert(caCert)
	return pool
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}
