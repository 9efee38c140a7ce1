package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/cert"
)

// TestUsageErrors: a command line that cannot run exits 2 with kubectl's two lines; nothing reaches
// a cluster.
func TestUsageErrors(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"bogus"}, "error: unknown command \"bogus\" for \"kubectl nodeaddr\"\nSee 'kubectl nodeaddr -h' for help and examples\n"},
		{[]string{"status", "--bogus"}, "error: unknown flag: --bogus\nSee 'kubectl nodeaddr status -h' for help and examples\n"},
		{[]string{"stale", "-o", "table"}, "error: unable to match a printer suitable for the output format \"table\", allowed formats are: " +
			"custom-columns,custom-columns-file,go-template,go-template-file,json,jsonpath,jsonpath-as-json,jsonpath-file,kyaml,name,template,templatefile,wide,yaml\n" +
			"See 'kubectl nodeaddr stale -h' for help and examples\n"},
		{[]string{"status", "-o", "jsonpath"}, "error: template format specified but no template given\nSee 'kubectl nodeaddr status -h' for help and examples\n"},
		{[]string{"status", "-o", "jsonpath={.items["}, "error: error parsing jsonpath {.items[, unterminated array\nSee 'kubectl nodeaddr status -h' for help and examples\n"},
		{[]string{"status", "-o", "go-template={{.items"}, "error: error parsing template {{.items, template: output:1: unclosed action\nSee 'kubectl nodeaddr status -h' for help and examples\n"},
		{[]string{"explain", "node-a", "-o", "custom-columns"}, "error: custom-columns format specified but no custom columns given\nSee 'kubectl nodeaddr explain -h' for help and examples\n"},
		{[]string{"stale", "-o", "custom-columns-file=/nonexistent"}, "error: error reading template /nonexistent, open /nonexistent: no such file or directory\nSee 'kubectl nodeaddr stale -h' for help and examples\n"},
		{[]string{"status", "-v"}, "error: flag needs an argument: 'v' in -v\nSee 'kubectl nodeaddr status -h' for help and examples\n"},
		{[]string{"status", "-v=high"}, "error: invalid argument \"high\" for \"-v, --v\" flag: strconv.ParseInt: parsing \"high\": invalid syntax\nSee 'kubectl nodeaddr status -h' for help and examples\n"},
		{[]string{"stale", "--pending-after=-1m"}, "error: --pending-after must not be negative and --kubelet-timeout must be positive\nSee 'kubectl nodeaddr stale -h' for help and examples\n"},
		{[]string{"stale", "--pending-after=soon"}, "error: invalid argument \"soon\" for \"--pending-after\" flag: time: invalid duration \"soon\"\nSee 'kubectl nodeaddr stale -h' for help and examples\n"},
	}
	for _, tt := range tests {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), tt.args, &stdout, &stderr); code != exitUsage {
			t.Errorf("%v: exit %d, want %d", tt.args, code, exitUsage)
		}
		if stderr.String() != tt.want || stdout.Len() != 0 {
			t.Errorf("%v: stderr %q, stdout %q; want stderr %q", tt.args, stderr.String(), stdout.String(), tt.want)
		}
	}
}

// TestHelp: the help of each command shows its examples and the exit codes, under kubectl's name;
// it exits 0.
func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"status", "--help"}, {"stale", "-h"}, {"explain", "-h"}} {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), args, &stdout, &stderr); code != exitOK {
			t.Errorf("%v: exit %d (%s)", args, code, stderr.String())
		}
		if !strings.Contains(stdout.String(), "kubectl nodeaddr") {
			t.Errorf("%v: help does not name kubectl nodeaddr:\n%s", args, stdout.String())
		}
		if args[0] != "--help" && !strings.Contains(stdout.String(), "Examples:\n  # ") {
			t.Errorf("%v: help has no examples:\n%s", args, stdout.String())
		}
		if !strings.Contains(stdout.String(), exitStatusHelp) {
			t.Errorf("%v: help does not give the exit codes:\n%s", args, stdout.String())
		}
	}
}

func TestErrorLine(t *testing.T) {
	nf := apierrors.NewNotFound(schema.GroupResource{Resource: "nodes"}, "x")
	for err, want := range map[error]string{
		nf:                               `Error from server (NotFound): nodes "x" not found`,
		errors.New("no such file"):       "error: no such file",
		errors.Join(errors.New("a"), nf): "Error from server (NotFound): a\nnodes \"x\" not found",
	} {
		if got := errorLine(err); got != want {
			t.Errorf("errorLine(%v) = %q, want %q", err, got, want)
		}
	}
}

func TestKubeletEndpoint(t *testing.T) {
	n := &corev1.Node{Status: corev1.NodeStatus{
		Addresses:       []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: "a"}, {Type: corev1.NodeExternalIP, Address: "203.0.113.1"}, {Type: corev1.NodeInternalIP, Address: "fd00::2"}},
		DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: 10250}}}}
	if ep, ok := kubeletEndpoint(n); !ok || ep != "[fd00::2]:10250" {
		t.Errorf("endpoint %q %v, want [fd00::2]:10250", ep, ok)
	}
	n.Status.Addresses = n.Status.Addresses[:2]
	if ep, ok := kubeletEndpoint(n); !ok || ep != "203.0.113.1:10250" {
		t.Errorf("endpoint %q %v, want the ExternalIP", ep, ok)
	}
	n.Status.DaemonEndpoints.KubeletEndpoint.Port = 0
	if ep, ok := kubeletEndpoint(n); ok {
		t.Errorf("endpoint %q without a port", ep)
	}
}

// TestProbeCert reads the certificate of a loopback TLS server and checks that the handshake carried
// no client certificate; a closed port and a silent one are errors (unknown), not certificates.
func TestProbeCert(t *testing.T) {
	certPEM, keyPEM, err := cert.GenerateSelfSignedCertKey("kubelet", []net.IP{net.ParseIP("127.0.0.1")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{pair}, ClientAuth: tls.RequestClientCert})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	clientCerts := make(chan int, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		tc := c.(*tls.Conn)
		if tc.Handshake() == nil {
			clientCerts <- len(tc.ConnectionState().PeerCertificates)
		}
	}()
	p := probeCert(context.Background(), ln.Addr().String(), 5*time.Second)
	if p.Err != nil || p.Cert == nil || len(p.Cert.IPAddresses) != 1 || !p.Cert.IPAddresses[0].Equal(net.ParseIP("127.0.0.1")) {
		t.Fatalf("probe = %+v", p)
	}
	if n := <-clientCerts; n != 0 {
		t.Errorf("the probe sent %d client certificates", n)
	}

	silent, err := net.Listen("tcp", "127.0.0.1:0") // accepts (the kernel does) and never answers
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	if p := probeCert(context.Background(), silent.Addr().String(), 200*time.Millisecond); p.Err == nil || p.Err.Error() != "no answer within 200ms" {
		t.Errorf("silent port: %+v", p)
	}
	addr := silent.Addr().String()
	silent.Close()
	if p := probeCert(context.Background(), addr, time.Second); p.Err == nil || p.Cert != nil {
		t.Errorf("closed port: %+v", p)
	}
}
