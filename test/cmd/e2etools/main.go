// Command e2etools is the `curl` and `nc` that Kubernetes' own e2e tests exec inside the agnhost
// image (test/harness/e2eimages.go), chosen by the name it runs as. The upstream image installs
// curl and OpenBSD netcat from Alpine; nothing can be pulled here, and Debian's static busybox has
// no curl and a netcat without -u/-v. Only the options the e2e framework passes are understood
// (test/e2e/framework/network/utils.go, test/e2e/framework/service/jig.go,
// test/e2e/network/hostport.go, v1.37.2); any other option exits 2, so a new use shows at once.
//
//	curl [-g] [-q] [-s] [-i] [-o FILE] [-w %{http_code}] [--max-time S] [--connect-timeout S] [--interface IP] URL
//	nc [-v] [-t] [-u] [-z] [-n] [-w S] HOST PORT   (stdin is sent; the answer is printed)
//
// curl's exit codes are curl's: 7 when the connection fails, 28 on a timeout, 22 never (no -f).
package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

func main() {
	name := filepath.Base(os.Args[0])
	var err error
	switch name {
	case "curl":
		err = curl(os.Args[1:])
	case "nc":
		err = nc(os.Args[1:])
	default:
		err = usageError("run as curl or nc, not " + name)
	}
	var ee exitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, ee.err)
		os.Exit(ee.code)
	default:
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(1)
	}
}

type exitError struct {
	code int
	err  error
}

func (e exitError) Error() string { return e.err.Error() }

func usageError(msg string) error { return exitError{2, errors.New(msg)} }

// seconds parses a timeout option's value ("1", "0.5").
func seconds(opt, v string) (time.Duration, error) {
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f < 0 {
		return 0, usageError(fmt.Sprintf("%s: bad number of seconds %q", opt, v))
	}
	return time.Duration(f * float64(time.Second)), nil
}

type curlOptions struct {
	url, out, format, iface string
	include, quiet          bool
	maxTime, connectTimeout time.Duration
}

func parseCurl(args []string) (curlOptions, error) {
	var o curlOptions
	for i := 0; i < len(args); i++ {
		a := args[i]
		value := func() (string, error) {
			if i+1 >= len(args) {
				return "", usageError(a + " needs a value")
			}
			i++
			return args[i], nil
		}
		var err error
		switch a {
		case "-g", "-q", "--globoff":
		case "-s", "--silent":
			o.quiet = true
		case "-i", "--include":
			o.include = true
		case "-o", "--output":
			o.out, err = value()
		case "-w", "--write-out":
			o.format, err = value()
		case "--interface":
			o.iface, err = value()
		case "--max-time", "-m", "--connect-timeout":
			var v string
			if v, err = value(); err == nil {
				var d time.Duration
				if d, err = seconds(a, v); a == "--connect-timeout" {
					o.connectTimeout = d
				} else {
					o.maxTime = d
				}
			}
		default:
			if strings.HasPrefix(a, "-") || o.url != "" {
				return o, usageError("unsupported argument " + a)
			}
			o.url = a
		}
		if err != nil {
			return o, err
		}
	}
	if o.url == "" {
		return o, usageError("no URL")
	}
	if !strings.Contains(o.url, "://") {
		o.url = "http://" + o.url
	}
	return o, nil
}

func curl(args []string) error {
	o, err := parseCurl(args)
	if err != nil {
		return err
	}
	dialer := &net.Dialer{Timeout: o.connectTimeout}
	if o.iface != "" {
		ip := net.ParseIP(o.iface)
		if ip == nil {
			return usageError("--interface takes an IP address here, not " + o.iface)
		}
		dialer.LocalAddr = &net.TCPAddr{IP: ip}
	}
	client := &http.Client{Timeout: o.maxTime, Transport: &http.Transport{DialContext: dialer.DialContext, Proxy: nil}}
	resp, err := client.Get(o.url)
	if err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return exitError{28, err}
		}
		return exitError{7, err}
	}
	defer resp.Body.Close()
	w := io.Writer(os.Stdout)
	if o.out != "" && o.out != "-" {
		f, err := os.Create(o.out)
		if err != nil {
			return exitError{23, err}
		}
		defer f.Close()
		w = f
	}
	if o.include {
		fmt.Fprintf(w, "%s %s\r\n", resp.Proto, resp.Status)
		resp.Header.Write(w)
		fmt.Fprint(w, "\r\n")
	}
	if _, err := io.Copy(w, resp.Body); err != nil {
		return exitError{56, err}
	}
	if o.format != "" {
		fmt.Print(strings.ReplaceAll(o.format, "%{http_code}", fmt.Sprintf("%03d", resp.StatusCode)))
	}
	return nil
}

type ncOptions struct {
	host, port      string
	udp, zero, verb bool
	wait            time.Duration
}

func parseNC(args []string) (ncOptions, error) {
	var o ncOptions
	var rest []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") || len(a) < 2 {
			rest = append(rest, a)
			continue
		}
		for j := 1; j < len(a); j++ {
			switch a[j] {
			case 'u':
				o.udp = true
			case 'v':
				o.verb = true
			case 'z':
				o.zero = true
			case 't', 'n':
			case 'w':
				v := a[j+1:]
				if v == "" {
					if i+1 >= len(args) {
						return o, usageError("-w needs a value")
					}
					i++
					v = args[i]
				}
				d, err := seconds("-w", v)
				if err != nil {
					return o, err
				}
				o.wait, j = d, len(a)
			default:
				return o, usageError(fmt.Sprintf("unsupported option -%c", a[j]))
			}
		}
	}
	if len(rest) != 2 {
		return o, usageError("want HOST PORT")
	}
	o.host, o.port = rest[0], rest[1]
	return o, nil
}

// nc sends stdin to HOST:PORT and prints what comes back: over TCP until the peer closes or
// nothing arrives for -w seconds; over UDP the one datagram stdin holds, then the answers that
// arrive within -w seconds (OpenBSD netcat's behaviour, which exits 0 even when none does).
func nc(args []string) error {
	o, err := parseNC(args)
	if err != nil {
		return err
	}
	network, addr := "tcp", net.JoinHostPort(o.host, o.port)
	if o.udp {
		network = "udp"
	}
	wait := o.wait
	if wait == 0 {
		wait = 10 * time.Second
	}
	conn, err := net.DialTimeout(network, addr, wait)
	if err != nil {
		return err
	}
	defer conn.Close()
	if o.verb {
		fmt.Fprintf(os.Stderr, "Connection to %s %s port [%s] succeeded!\n", o.host, o.port, network)
	}
	if o.zero {
		return nil
	}
	in, err := io.ReadAll(os.Stdin)
	if err != nil {
		return err
	}
	if len(in) > 0 {
		if _, err := conn.Write(in); err != nil {
			return err
		}
	}
	buf := make([]byte, 64<<10)
	for {
		conn.SetReadDeadline(time.Now().Add(wait))
		n, err := conn.Read(buf)
		os.Stdout.Write(buf[:n])
		var ne net.Error
		switch {
		case err == nil:
		case errors.Is(err, io.EOF), errors.As(err, &ne) && ne.Timeout():
			return nil
		case o.udp:
			return nil // ICMP unreachable: OpenBSD netcat prints nothing and exits 0 too
		default:
			return err
		}
	}
}
