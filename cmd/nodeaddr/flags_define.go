package main

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/nodeaddr/nodeaddr/internal/inspect"
	"github.com/nodeaddr/nodeaddr/internal/vocab"
	"github.com/nodeaddr/nodeaddr/resolver"
	"github.com/nodeaddr/nodeaddr/resolver/discovery"
)

// defaultTargets are the targets when a target flag is absent or empty: the route toward the
// Internet of each family (no packet is sent; the kernel is only asked which source it would use).
// InternalIP first tries the route toward the API server's own addresses (resolver's apiserver
// target), which reaches the cluster where the default route does not (docs/configuration.md,
// "Default targets by host shape").
const (
	defaultTargets         = "8.8.8.8,2001:4860:4860::8888"
	defaultInternalTargets = resolver.APIServerTarget + "," + defaultTargets
)

// defaultTargetsOf is type t's default target list.
func defaultTargetsOf(t resolver.AddressType) string {
	if t == resolver.InternalIP {
		return defaultInternalTargets
	}
	return defaultTargets
}

// noTargets is the target flag value that leaves a type unmanaged.
const noTargets = "none"

// defineFlags declares every flag, grouped into the --help sections, bound to o and r. Defaults from
// getenv: NODE_NAME (the DaemonSet sets it from spec.nodeName), NODEADDR_ANNOTATIONS and
// POD_NAMESPACE (the chart's test pod sets it).
func (o *options) defineFlags(r *rawFlags, getenv func(string) string) *namedFlagSets {
	g := &namedFlagSets{}
	fs := g.flagSet("Node")
	fs.StringVar(&o.nodeName, "node-name", getenv("NODE_NAME"), "name of the Node to manage (env NODE_NAME; required unless --dry-run)")
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "path to a kubeconfig (else $KUBECONFIG, else in-cluster config)")
	fs.BoolVar(&o.runOnce, "run-once", false, "reconcile once and exit (0 on success, 1 on failure)")
	fs.DurationVar(&o.timeout, "timeout", 30*time.Second, "with --run-once: how long to wait for the Node and retry; with --check-install: how long the install may take to pass")
	fs.BoolVar(&o.dryRun, "dry-run", false, "print the desired addresses as JSON lines on stdout instead of writing the Node; needs no cluster, and opens a listener only when its bind-address flag is given")
	fs.BoolVar(&o.explain, "explain", false, "with --dry-run: print why each address was chosen or dropped before each JSON line")
	fs.StringVarP(&o.output, "output", "o", "text", "with --explain: the explanation's format, text or json")
	fs.BoolVar(&o.version, "version", false, "print the version and exit")
	// --help is a flag of its own, hidden from the list, so that --help=false means false: pflag's
	// built-in help answers --help whatever its value. -h and -help stay pflag's (parseFlags).
	fs.BoolVar(&o.help, "help", false, "print this help and exit")
	_ = fs.MarkHidden("help")

	fs = g.flagSet("Address selection") // docs/configuration.md, "Selection policy"
	fs.StringVar(&r.externalEqual, "external-ip-equal-internal", "drop", "an ExternalIP equal to an InternalIP on the Node (nodeaddr's or the kubelet's): drop (not published, as local-ccm does) or keep")
	r.perType = map[resolver.AddressType]*typeFlags{resolver.InternalIP: {}, resolver.ExternalIP: {}}
	for _, t := range addressTypes {
		pre, tf, unless := flagPrefix(t), r.perType[t], ""
		if t == resolver.InternalIP {
			unless = " (unless --internal-ip-interfaces or an accepting --internal-ip-cidrs is set)"
		}
		fs.StringVar(&tf.target, pre+"-target", "", "ordered comma-separated targets: IPs, at most one per family, and apiserver (the API server's own addresses); per family the first whose route source is usable becomes "+string(t)+"; empty or absent: "+defaultTargetsOf(t)+unless+"; none: "+string(t)+" not managed")
		fs.StringVar(&tf.interfaces, pre+"-interfaces", "", "comma-separated regular expressions (anchored) of interfaces whose addresses are "+string(t)+" candidates besides the route source")
		fs.StringVar(&tf.exclude, pre+"-exclude-interfaces", "", "comma-separated regular expressions (anchored) of interfaces never used for "+string(t)+", added to the default exclusions")
		fs.StringVar(&tf.cidrs, pre+"-cidrs", "", "ordered comma-separated CIDRs for "+string(t)+": the first matching one gives the priority, !CIDR rejects; alone, they select from every interface; a warning at start when they accept no address of the host in a family")
	}
	fs.BoolVar(&o.allowSecondary, "allow-secondary", false, "accept IPv4 secondary addresses (keepalived and kube-vip add VIPs as secondaries)")
	fs.BoolVar(&o.defaultExclusions, "default-exclusions", true, "exclude container/CNI interfaces ("+strings.Join(resolver.DefaultExcludeInterfaces(), " ")+"), the Node's pod CIDRs and VIP-style addresses (/32 on lo, labelled aliases, a /32 beside a wider address)")
	fs.StringVar(&r.serviceCIDR, "service-cidr", "", "the cluster's service CIDR(s), comma-separated: never a node address")

	fs = g.flagSet("External address discovery")
	fs.StringVar(&o.discovery.raw, "external-ip-discovery", "", "discover the ExternalIP behind NAT with STUN: comma-separated stun:HOST:PORT servers (an IPv6 address in brackets), asked from the route source; the address a majority agrees on replaces the route source as ExternalIP. Empty: off, nothing is sent")
	fs.DurationVar(&o.discovery.interval, "external-ip-discovery-interval", discovery.DefaultInterval, "how often the discovered address is checked again (jittered by up to 10%), besides at start and whenever the route source changes")
	fs.DurationVar(&o.discovery.staleAfter, "external-ip-discovery-stale-after", discovery.DefaultStaleAfter, "how long a discovered address stays published while no round of probes confirms it (servers down or disagreeing); then that family's ExternalIP is withdrawn")

	fs = g.flagSet("Resolution")
	fs.DurationVar(&o.debounce, "debounce", 10*time.Millisecond, "quiet time after the last address, route or rule event before resolving")
	fs.DurationVar(&o.linkDebounce, "link-debounce", 100*time.Millisecond, "hold after the last link event (carrier, operational state) before resolving, so that a flapping carrier is not published (never shorter than --debounce)")
	fs.DurationVar(&o.debounceMaxDelay, "debounce-max-delay", time.Second, "longest delay from the first kernel event of a burst to its resolution")
	fs.DurationVar(&o.removalGrace, "removal-grace", 5*time.Second, "how long an address must be gone, with no replacement, before it is removed from the Node")
	fs.DurationVar(&o.resyncInterval, "resync-interval", 60*time.Second, "periodic full resolution, the backstop for missed events (0 disables)")
	fs.IntVar(&o.netlinkRcvBuf, "netlink-receive-buffer", 4<<20, "requested netlink socket receive buffer in bytes (capped by net.core.rmem_max)")

	fs = g.flagSet("Publishing")
	fs.Float64Var(&o.publishRate, "publish-rate", 1, "sustained Node writes per second")
	fs.IntVar(&o.publishBurst, "publish-burst", 3, "Node writes allowed in a burst")
	fs.BoolVar(&o.removeTaint, "remove-taint", true, "remove the node.cloudprovider.kubernetes.io/uninitialized taint once the addresses are set")
	fs.BoolVar(&o.approvalRecord, "approval-record", false, "also write the annotation "+vocab.RecordAnnotation+": the IPs nodeaddr wrote into status.addresses, which the central approver (nodeaddr approver, deploy/components/kubelet-serving-csr) approves kubelet-serving certificates for")
	fs.BoolVar(&o.approvalRecord, "approve-kubelet-serving-csr", false, "deprecated: approval moved to the central approver; the same as --approval-record")
	fs.StringVar(&r.annotations, "annotations", getenv("NODEADDR_ANNOTATIONS"), "Node annotations to publish the addresses in (env NODEADDR_ANNOTATIONS): comma-separated presets ("+strings.Join(vocab.PresetNames(), ", ")+") and KEY=FORMAT items, FORMAT internal-|external- + ipv4, ipv6, ips, ipv4-cidr or ipv6-cidr")
	fs.DurationVar(&o.overwriteBackoff, "overwrite-backoff", 10*time.Second, "first delay before rewriting addresses another writer (e.g. a kubelet without --cloud-provider=external) keeps reverting; doubles with each further revert")
	fs.DurationVar(&o.overwriteMax, "overwrite-backoff-max", 10*time.Minute, "longest delay before rewriting reverted addresses")

	fs = g.flagSet("Listeners")
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", ":9810", "address for /metrics (0 disables)")
	fs.StringVar(&o.probeAddr, "health-probe-bind-address", "127.0.0.1:9811", "address for /healthz and /readyz (0 disables); loopback, where the kubelet probes with httpGet.host 127.0.0.1")
	fs.BoolVar(&o.metricsSecure, "metrics-secure", true, "serve /metrics over HTTPS to scrapers whose bearer token the API server authenticates (TokenReview) and whose user --metrics-allowed-scrapers lists (that list empty: a SubjectAccessReview for get on /metrics decides); false: plain HTTP for anyone, allowed only on a loopback --metrics-bind-address")
	fs.StringVar(&o.tlsCertFile, "tls-cert-file", "", "PEM serving certificate for /metrics with --metrics-secure (empty: a self-signed one generated at start)")
	fs.StringVar(&o.tlsKeyFile, "tls-private-key-file", "", "PEM private key of --tls-cert-file")
	fs.StringVar(&o.tokenAudience, "metrics-token-audience", "nodeaddr", "audience a scraper's bearer token must be issued for (the TokenReview's spec.audiences): a projected ServiceAccount token with this audience, which the API server itself refuses; empty: the API server's own audiences (a token a compromised agent could replay against the API server)")
	fs.StringSliceVar(&o.scrapers, "metrics-allowed-scrapers", nil, "comma-separated usernames allowed to scrape /metrics, e.g. system:serviceaccount:monitoring:prometheus-k8s: the agent authorizes them itself and sends no SubjectAccessReview (its RBAC can then drop subjectaccessreviews); empty: a SubjectAccessReview for get on /metrics decides")

	fs = g.flagSet("Logging")
	fs.StringVar(&r.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	fs.StringVar(&o.logFormat, "log-format", "text", "log format: text or json")
	// -v=N and --v=N, as klog's flag in Kubernetes components (and local-ccm).
	fs.IntVarP(&r.v, "v", "v", 0, "verbosity 0-10 (local-ccm's --v), used when --log-level is not set: 0 info, 1-4 debug, N above 4 also client-go's V(N) logs (6: each API request)")

	fs = g.flagSet("Install check")
	fs.BoolVar(&o.check.enabled, "check-install", false, "check the install and exit (the chart's helm test): every selected Node has a ready agent pod and an InternalIP; 0 when it does within --timeout, else 1 with a line per Node; not with --dry-run or --run-once")
	fs.StringVar(&o.check.namespace, "check-namespace", getenv("POD_NAMESPACE"), "with --check-install: the agent pods' namespace (env POD_NAMESPACE; empty: every namespace)")
	fs.StringVar(&o.check.agentSelector, "check-agent-selector", inspect.AgentSelector, "with --check-install: label selector of the agent pods")
	fs.StringVar(&o.check.nodeSelector, "check-node-selector", "kubernetes.io/os=linux", "with --check-install: label selector of the Nodes the DaemonSet runs on (its nodeSelector)")

	fs = g.flagSet("Compatibility")
	fs.DurationVar(&r.reconcile, "reconcile-interval", 0, "alias of --resync-interval (local-ccm)")
	return g
}

// helpColumns is the width --help wraps flag descriptions to.
const helpColumns = 100

// namedFlagSets are the --help sections, in order, as k8s.io/component-base's cliflag.NamedFlagSets
// (not imported: these few lines do not justify the dependency).
type namedFlagSets struct{ sets []*pflag.FlagSet }

// flagSet returns a new section called name.
func (g *namedFlagSets) flagSet(name string) *pflag.FlagSet {
	g.sets = append(g.sets, pflag.NewFlagSet(name, pflag.ContinueOnError))
	return g.sets[len(g.sets)-1]
}

// all is the flag set the command line is parsed with, sharing the sections' *pflag.Flag values. It
// prints nothing: parseFlags turns its errors into one line and prints --help itself.
func (g *namedFlagSets) all() *pflag.FlagSet {
	fs := pflag.NewFlagSet("nodeaddr", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	// Flags after the first argument that is not one are not parsed, as with the flag package:
	// nodeaddr takes no arguments, so the first one is the error.
	fs.SetInterspersed(false)
	for _, s := range g.sets {
		fs.AddFlagSet(s)
	}
	return fs
}

// printUsage writes --help: a heading, then the non-empty sections, as cliflag.PrintSections does.
func (g *namedFlagSets) printUsage(w io.Writer) {
	fmt.Fprint(w, "Usage: nodeaddr [flags]\n\nKeeps this Node's status.addresses in step with the kernel.\n")
	for _, s := range g.sets {
		if usage := s.FlagUsagesWrapped(helpColumns); usage != "" {
			fmt.Fprintf(w, "\n%s flags:\n\n%s", s.Name(), usage)
		}
	}
	fmt.Fprint(w, helpExamples)
}

// helpExamples close --help: the common command lines, each one accepted as written (a test parses
// them, shell quotes removed). docs/configuration.md has the scenarios in full.
const helpExamples = `
Examples:

  # What nodeaddr would publish on this host, without a cluster: one JSON line, then exit.
  nodeaddr --dry-run --run-once

  # The same, with why each candidate address was chosen or dropped (-o json for JSON).
  nodeaddr --dry-run --run-once --explain

  # A DaemonSet's args: Kubernetes expands $(NODE_NAME), set from spec.nodeName.
  nodeaddr --node-name=$(NODE_NAME) --log-format=json

  # InternalIP from the route toward a private gateway, one target per family; ExternalIP unmanaged.
  nodeaddr --node-name=node-1 --internal-ip-target=10.0.0.1,fd00::1 --external-ip-target=none

  # InternalIP from the first matching subnet, on any interface; never from 10.9.0.0/16.
  nodeaddr --node-name=node-1 --internal-ip-cidrs='!10.9.0.0/16,10.0.0.0/8'

  # Reconcile the Node once with a kubeconfig's cluster and exit (0 on success, 1 on failure).
  nodeaddr --node-name=node-1 --kubeconfig=$HOME/.kube/config --run-once
`

// discoveryOptions are the flags of external-address discovery (docs/nat.md).
type discoveryOptions struct {
	raw                  string
	servers              []discovery.Server
	interval, staleAfter time.Duration
}

// validate parses the servers and checks the durations once every flag is parsed.
func (d *discoveryOptions) validate() error {
	var err error
	if d.servers, err = discovery.ParseServers(d.raw); err != nil {
		return usagef("--external-ip-discovery: %v", err)
	}
	if d.interval <= 0 {
		return usagef("--external-ip-discovery-interval: %s is not positive", d.interval)
	}
	if d.staleAfter <= 0 {
		return usagef("--external-ip-discovery-stale-after: %s is not positive", d.staleAfter)
	}
	if d.staleAfter < d.interval {
		return usagef("--external-ip-discovery-stale-after (%s) is shorter than --external-ip-discovery-interval (%s): the address would lapse between two checks",
			d.staleAfter, d.interval)
	}
	return nil
}

// agentConfig is agent.Config.Discovery (its Prober is the agent's), nil when off.
func (d *discoveryOptions) agentConfig(log *slog.Logger, m *discovery.Metrics) *discovery.Config {
	if len(d.servers) == 0 {
		return nil
	}
	return &discovery.Config{Servers: d.servers, Interval: d.interval, StaleAfter: d.staleAfter, Logger: log, Metrics: m}
}
