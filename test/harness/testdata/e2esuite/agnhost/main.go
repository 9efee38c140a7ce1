// Command agnhost is Kubernetes' agnhost (k8s.io/kubernetes/test/images/agnhost) with only the
// subcommands the e2e kit's focus list runs (harness.E2EFocus): netexec, pause (the image's
// default command), porter, serve-hostname, connect and the DNS ones. The whole agnhost links
// every subcommand's dependencies (webhooks, a CRD converter, a fake registry, gRPC): about 1 400
// packages against these 400, which a cold CI run cannot afford; a test that needs another
// subcommand fails at once with "unknown command". The root command mirrors upstream's main.
package main

import (
	"os"

	"github.com/spf13/cobra"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/test/images/agnhost/connect"
	"k8s.io/kubernetes/test/images/agnhost/dns"
	"k8s.io/kubernetes/test/images/agnhost/netexec"
	"k8s.io/kubernetes/test/images/agnhost/pause"
	"k8s.io/kubernetes/test/images/agnhost/porter"
	servehostname "k8s.io/kubernetes/test/images/agnhost/serve-hostname"
)

func main() {
	rootCmd := &cobra.Command{Use: "app", Version: "2.66.1"}
	rootCmd.AddCommand(connect.CmdConnect)
	rootCmd.AddCommand(dns.CmdDNSSuffix)
	rootCmd.AddCommand(dns.CmdDNSServerList)
	rootCmd.AddCommand(dns.CmdEtcHosts)
	rootCmd.AddCommand(netexec.CmdNetexec)
	rootCmd.AddCommand(pause.CmdPause)
	rootCmd.AddCommand(porter.CmdPorter)
	rootCmd.AddCommand(servehostname.CmdServeHostname)
	os.Exit(cli.Run(rootCmd))
}
