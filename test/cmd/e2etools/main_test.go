package main

import (
	"reflect"
	"testing"
	"time"
)

// The command lines the v1.37.2 e2e framework runs inside agnhost (framework/network/utils.go,
// framework/service/jig.go, network/hostport.go), and what each must mean.
func TestParseCurl(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want curlOptions
	}{
		{[]string{"-g", "--connect-timeout", "5", "--interface", "192.0.2.10", "http://127.0.0.1:54323/hostname"},
			curlOptions{url: "http://127.0.0.1:54323/hostname", iface: "192.0.2.10", connectTimeout: 5 * time.Second}},
		{[]string{"-g", "-q", "-s", "--max-time", "15", "--connect-timeout", "1", "http://10.96.0.7:80/hostName"},
			curlOptions{url: "http://10.96.0.7:80/hostName", quiet: true, maxTime: 15 * time.Second, connectTimeout: time.Second}},
		{[]string{"-g", "-q", "-s", "-o", "/dev/null", "-w", "%{http_code}", "http://10.244.0.5:8083/dial"},
			curlOptions{url: "http://10.244.0.5:8083/dial", quiet: true, out: "/dev/null", format: "%{http_code}"}},
		{[]string{"-i", "-q", "-s", "--connect-timeout", "1", "http://localhost:8080/healthz"},
			curlOptions{url: "http://localhost:8080/healthz", include: true, quiet: true, connectTimeout: time.Second}},
	} {
		got, err := parseCurl(tc.args)
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("parseCurl(%q) = %+v, %v; want %+v", tc.args, got, err, tc.want)
		}
	}
	for _, bad := range [][]string{{"-f", "http://x/"}, {}, {"--max-time"}, {"http://a/", "http://b/"}, {"--connect-timeout", "x", "http://a/"}} {
		if _, err := parseCurl(bad); err == nil {
			t.Errorf("parseCurl(%q) accepted", bad)
		}
	}
}

func TestParseNC(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want ncOptions
	}{
		{[]string{"-v", "-t", "-w", "2", "10.96.0.7", "80"}, ncOptions{host: "10.96.0.7", port: "80", verb: true, wait: 2 * time.Second}},
		{[]string{"-v", "-u", "-w", "2", "192.0.2.10", "30080"}, ncOptions{host: "192.0.2.10", port: "30080", udp: true, verb: true, wait: 2 * time.Second}},
		{[]string{"-u", "-w", "5", "192.0.2.10", "54323"}, ncOptions{host: "192.0.2.10", port: "54323", udp: true, wait: 5 * time.Second}},
		{[]string{"-w", "1", "-u", "10.244.0.9", "8081"}, ncOptions{host: "10.244.0.9", port: "8081", udp: true, wait: time.Second}},
		{[]string{"-zv", "-w2", "10.96.0.7", "80"}, ncOptions{host: "10.96.0.7", port: "80", zero: true, verb: true, wait: 2 * time.Second}},
	} {
		got, err := parseNC(tc.args)
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("parseNC(%q) = %+v, %v; want %+v", tc.args, got, err, tc.want)
		}
	}
	for _, bad := range [][]string{{"-l", "-p", "80"}, {"10.96.0.7"}, {"-w"}, {"-e", "sh", "h", "1"}} {
		if _, err := parseNC(bad); err == nil {
			t.Errorf("parseNC(%q) accepted", bad)
		}
	}
}
