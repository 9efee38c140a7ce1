package harness

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// auditLogMaxMB is the audit log's size before kube-apiserver would rotate it: far above what any
// test or benchmark here writes (5 000 agents for an hour write a few GB at Metadata level).
const auditLogMaxMB = 1 << 20

// ControlPlane is a throwaway etcd + kube-apiserver on loopback.
type ControlPlane struct {
	Dir        string
	Port       int // kube-apiserver secure port on 127.0.0.1
	EtcdPort   int
	AdminToken string
	CAFile     string
	AuditLog   string
	// Admin is a client with system:masters rights.
	Admin  kubernetes.Interface
	Config *rest.Config
	// ExtraArgs are appended to kube-apiserver's arguments (the real node adds NodeRestriction).
	ExtraArgs []string
	// ReadyTimeout bounds the wait for /readyz after each start (3 min when zero: a start takes
	// about 3 s alone, and more than 60 s was seen in make test, where every package runs at once
	// on 2 cores: the oldest release's, its RBAC bootstrap still reconciling).
	ReadyTimeout time.Duration

	bins      Binaries
	etcd, api *proc
	mu        sync.Mutex
}

// proc is a started process whose exit is observed by one goroutine.
type proc struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

func startProc(cmd *exec.Cmd) (*proc, error) {
	// The child dies with the test process, even when a timeout kills it before its cleanups run.
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	if err := spawn(cmd); err != nil { // from the one thread that never ends (spawn.go)
		return nil, err
	}
	p := &proc{cmd: cmd, done: make(chan struct{})}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	return p, nil
}

// stop sends SIGTERM, then SIGKILL after 10 s, and waits for the exit.
func (p *proc) stop() {
	if p == nil {
		return
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		p.cmd.Process.Kill()
		<-p.done
	}
}

// StartControlPlane starts etcd and kube-apiserver in a fresh directory and waits until the API
// server is ready. Everything is stopped and removed when t ends.
func StartControlPlane(t testing.TB) *ControlPlane {
	t.Helper()
	return StartControlPlaneVersion(t, KubernetesVersion)
}

// StartControlPlaneVersion is StartControlPlane with the kube-apiserver of another release (one of
// MatrixVersions, built on first use); etcd is the same for every release, and every release since
// 1.30 accepts the flags StartAPIServer passes.
func StartControlPlaneVersion(t testing.TB, version string) *ControlPlane {
	t.Helper()
	return startControlPlane(t, version, nil)
}

// StartControlPlaneWith is StartControlPlane with configure run on the prepared control plane
// before it starts: static tokens (AddToken), kube-apiserver flags (ExtraArgs).
func StartControlPlaneWith(t testing.TB, configure func(*ControlPlane) error) *ControlPlane {
	t.Helper()
	return startControlPlane(t, KubernetesVersion, configure)
}

func startControlPlane(t testing.TB, version string, configure func(*ControlPlane) error) *ControlPlane {
	t.Helper()
	bins := MustBuild(t)
	bins.APIServer = MustBuildAPIServer(t, version)
	cp, err := NewControlPlane(bins, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if configure != nil {
		if err := configure(cp); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		cp.Stop()
		if t.Failed() {
			for _, f := range []string{"etcd.log", "kube-apiserver.log"} {
				t.Logf("last lines of %s:\n%s", f, tailFile(filepath.Join(cp.Dir, f), 40))
			}
		}
	})
	if err := cp.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return cp
}

// NewControlPlane prepares keys, tokens and policies in dir.
func NewControlPlane(bins Binaries, dir string) (*ControlPlane, error) {
	cp := &ControlPlane{Dir: dir, bins: bins, AdminToken: randomToken()}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	files := map[string][]byte{
		"sa.key":     pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}),
		"tokens.csv": []byte(cp.AdminToken + ",admin,admin-uid,system:masters\n"),
		"audit-policy.yaml": []byte(`apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
`),
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return nil, err
		}
	}
	cp.AuditLog = filepath.Join(dir, "audit.log")
	cp.CAFile = filepath.Join(dir, "certs", "apiserver.crt")
	if cp.Port, err = FreePort(); err != nil {
		return nil, err
	}
	if cp.EtcdPort, err = FreePort(); err != nil {
		return nil, err
	}
	return cp, nil
}

// AddToken adds a static token for user in groups and returns it; call it before Start (the API
// server reads its token file once).
func (cp *ControlPlane) AddToken(user string, groups ...string) (string, error) {
	token := randomToken()
	f, err := os.OpenFile(filepath.Join(cp.Dir, "tokens.csv"), os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return "", err
	}
	defer f.Close()
	_, err = fmt.Fprintf(f, "%s,%s,%s-uid,\"%s\"\n", token, user, user, strings.Join(groups, ","))
	return token, err
}

// Start starts etcd then the API server and waits for /readyz.
func (cp *ControlPlane) Start(ctx context.Context) error {
	if err := cp.StartEtcd(); err != nil {
		return err
	}
	return cp.StartAPIServer(ctx)
}

// StartEtcd starts (or restarts) etcd on its port with its data directory.
func (cp *ControlPlane) StartEtcd() error {
	peer, err := FreePort()
	if err != nil {
		return err
	}
	cmd := exec.Command(cp.bins.Etcd, "--data-dir", filepath.Join(cp.Dir, "etcd"),
		"--listen-client-url", fmt.Sprintf("http://127.0.0.1:%d", cp.EtcdPort),
		"--listen-peer-url", fmt.Sprintf("http://127.0.0.1:%d", peer))
	p, err := startLogged(cmd, filepath.Join(cp.Dir, "etcd.log"))
	if err != nil {
		return fmt.Errorf("start etcd: %w", err)
	}
	cp.mu.Lock()
	cp.etcd = p
	cp.mu.Unlock()
	return Poll(30*time.Second, 50*time.Millisecond, fmt.Sprintf("etcd listens on %d", cp.EtcdPort), func() (bool, string) {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", cp.EtcdPort), time.Second)
		if err != nil {
			return false, err.Error()
		}
		c.Close()
		return true, ""
	})
}

// StartAPIServer starts (or restarts) kube-apiserver and waits until it is ready.
func (cp *ControlPlane) StartAPIServer(ctx context.Context) error {
	cmd := exec.Command(cp.bins.APIServer,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--endpoint-reconciler-type=none", // no kubernetes Service endpoints for a loopback server
		fmt.Sprintf("--secure-port=%d", cp.Port),
		"--cert-dir="+filepath.Join(cp.Dir, "certs"),
		fmt.Sprintf("--etcd-servers=http://127.0.0.1:%d", cp.EtcdPort),
		"--token-auth-file="+filepath.Join(cp.Dir, "tokens.csv"),
		"--authorization-mode=Node,RBAC",
		"--service-account-key-file="+filepath.Join(cp.Dir, "sa.key"),
		"--service-account-signing-key-file="+filepath.Join(cp.Dir, "sa.key"),
		"--service-account-issuer=https://kubernetes.default.svc",
		"--api-audiences=https://kubernetes.default.svc",
		"--service-cluster-ip-range=10.96.0.0/16",
		"--audit-policy-file="+filepath.Join(cp.Dir, "audit-policy.yaml"),
		"--audit-log-path="+cp.AuditLog,
		"--audit-log-format=json",
		"--audit-log-mode=blocking",
		// kube-apiserver writes the audit log through lumberjack, which rotates at 100 MB when
		// --audit-log-maxsize is 0 (its default): the readers here (AuditSince, the soak's tail)
		// read one file, so a rotation silently dropped every earlier record. 5 000 agents cross
		// 100 MB in minutes, and their requests were under-counted.
		fmt.Sprintf("--audit-log-maxsize=%d", auditLogMaxMB),
		"--enable-priority-and-fairness=false",
		"--v=0",
	)
	cmd.Args = append(cmd.Args, cp.ExtraArgs...)
	p, err := startLogged(cmd, filepath.Join(cp.Dir, "kube-apiserver.log"))
	if err != nil {
		return fmt.Errorf("start kube-apiserver: %w", err)
	}
	cp.mu.Lock()
	cp.api = p
	cp.mu.Unlock()
	cp.Config = &rest.Config{
		Host:            fmt.Sprintf("https://127.0.0.1:%d", cp.Port),
		BearerToken:     cp.AdminToken,
		TLSClientConfig: rest.TLSClientConfig{Insecure: true},
		QPS:             200, Burst: 400,
	}
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	wait := cp.ReadyTimeout
	if wait <= 0 {
		wait = 3 * time.Minute
	}
	exited := false
	if err := Poll(wait, 100*time.Millisecond, "kube-apiserver ready", func() (bool, string) {
		req, _ := http.NewRequestWithContext(ctx, "GET", cp.Config.Host+"/readyz", nil)
		req.Header.Set("Authorization", "Bearer "+cp.AdminToken)
		resp, err := hc.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return true, ""
			}
		}
		select {
		case <-p.done:
			exited = true
			return true, ""
		default:
		}
		return false, fmt.Sprintf("last error %v", err)
	}); err != nil {
		return err
	}
	if exited {
		return fmt.Errorf("kube-apiserver exited before ready: %v\n%s", p.err,
			tailFile(filepath.Join(cp.Dir, "kube-apiserver.log"), 20))
	}
	cs, err := kubernetes.NewForConfig(cp.Config)
	if err != nil {
		return err
	}
	cp.Admin = cs
	return nil
}

// StopAPIServer stops kube-apiserver (etcd keeps running).
func (cp *ControlPlane) StopAPIServer() { cp.take(&cp.api).stop() }

// StopEtcd stops etcd.
func (cp *ControlPlane) StopEtcd() { cp.take(&cp.etcd).stop() }

// take clears *slot under the lock and returns what it held.
func (cp *ControlPlane) take(slot **proc) *proc {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	p := *slot
	*slot = nil
	return p
}

// Stop stops both.
func (cp *ControlPlane) Stop() {
	cp.StopAPIServer()
	cp.StopEtcd()
}

func randomToken() string {
	b := make([]byte, 16)
	rand.Read(b)
	return fmt.Sprintf("%x", b)
}

// AuditEvent is the part of an audit record the tests count.
type AuditEvent struct {
	Verb       string `json:"verb"`
	RequestURI string `json:"requestURI"`
	User       struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
		Name        string `json:"name"`
		Namespace   string `json:"namespace"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	Stage string `json:"stage"`
	// Timestamp is when the stage was reached (for a completed request: when it completed).
	Timestamp time.Time `json:"stageTimestamp"`
}

// Audit returns the completed requests made by user so far, in order.
func (cp *ControlPlane) Audit(user string) ([]AuditEvent, error) {
	f, err := os.Open(cp.AuditLog)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []AuditEvent
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e AuditEvent
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			continue
		}
		if e.User.Username != user || (e.Stage != "ResponseComplete" && e.Stage != "Panic") {
			continue
		}
		out = append(out, e)
	}
	return out, sc.Err()
}

// startLogged starts cmd with its output appended to file.
func startLogged(cmd *exec.Cmd, file string) (*proc, error) {
	f, err := os.OpenFile(file, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer f.Close() // the child keeps its own descriptor
	cmd.Stdout, cmd.Stderr = f, f
	return startProc(cmd)
}

// tailFile returns the last n lines of file.
func tailFile(file string, n int) string {
	b, err := os.ReadFile(file)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
