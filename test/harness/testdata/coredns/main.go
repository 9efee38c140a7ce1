// Command coredns is CoreDNS with only the plugins the e2e kit's cluster DNS uses (the harness
// builds it from the Go module proxy: test/harness/clusterdns.go). Linking the full plugin list
// (core/plugin) would compile the cloud providers' SDKs too.
package main

import (
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/ready"
)

func main() { coremain.Run() }
