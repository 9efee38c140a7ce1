package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/nodeaddr/nodeaddr/publisher"
	"github.com/nodeaddr/nodeaddr/resolver"
)

// options are the parsed, validated command-line flags.
type options struct {
	nodeName         string
	kubeconfig       string
	internalTargets  []resolver.Target
	externalTargets  []resolver.Target
	debounce         time.Duration
	debounceMaxDelay time.Duration
	removalGrace     time.Duration
	resyncInterval   time.Duration
	publishRate      float64
	publishBurst     int
	removeTaint      bool
	runOnce          bool
	timeout          time.Duration
	dryRun           bool
	metricsAddr      string
	probeAddr        string
	logLevel         slog.Level
	logFormat        string
	version          bool
	netlinkRcvBuf    int
	overwriteBackoff time.Duration
	overwriteMax     time.Duration
	deprecations     []string

	// Selection policy (README, "Selection policy").
	typePolicy        map[resolver.AddressType]resolver.TypePolicy
	allowSecondary    bool
	defaultExclusions bool
	serviceCIDRs      []netip.Prefix

	annotations []publisher.AnnotationSpec
	// keepExternalEqualInternal is --external-ip-equal-internal=keep.
	keepExternalEqualInternal bool

	listenerOptions
	discovery discoveryOptions
}

// usageError is a bad command line: exit code 2, one line on stderr.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

// defaultTargets are the targets of both address types when their flag is absent or empty: the
// route toward the public Internet of each family (no packet is sent; the kernel is only asked
// which source address it would use).
const defaultTargets = "8.8.8.8,2001:4860:4860::8888"

// noTargets is the target flag value that leaves a type unmanaged.
const noTargets = "none"

// parseFlags parses args (without the program name). getenv supplies NODE_NAME and KUBECONFIG;
// hostname the dry-run default node name. -h/--help returns flag.ErrHelp after printing usage to out.
func parseFlags(args []string, getenv func(string) string, hostname func() (string, error), out io.Writer) (*options, error) {
	fs := flag.NewFlagSet("nodeaddr", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o := &options{}
	var internal, external, logLevel string
	var reconcile time.Duration
	var v int
	fs.StringVar(&o.nodeName, "node-name", getenv("NODE_NAME"), "name of the Node to manage (env NODE_NAME; required unless --dry-run)")
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "path to a kubeconfig (else $KUBECONFIG, else in-cluster config)")
	fs.StringVar(&internal, "internal-ip-target", "", "comma-separated targets, at most one per family, whose route source becomes InternalIP; empty or absent: "+defaultTargets+" (unless --internal-ip-interfaces or an accepting --internal-ip-cidrs is set); none: InternalIP not managed")
	fs.StringVar(&external, "external-ip-target", "", "comma-separated targets, at most one per family, whose route source becomes ExternalIP; empty or absent: "+defaultTargets+"; none: ExternalIP not managed")
	var externalEqual string
	fs.StringVar(&externalEqual, "external-ip-equal-internal", "drop", "an ExternalIP equal to an InternalIP on the Node (nodeaddr's or the kubelet's): drop (not published, as local-ccm does) or keep")
	fs.DurationVar(&o.debounce, "debounce", 100*time.Millisecond, "quiet time after the last kernel event before resolving")
	fs.DurationVar(&o.debounceMaxDelay, "debounce-max-delay", time.Second, "longest delay from the first kernel event of a burst to its resolution")
	fs.DurationVar(&o.removalGrace, "removal-grace", 5*time.Second, "how long an address must be gone, with no replacement, before it is removed from the Node")
	fs.DurationVar(&o.resyncInterval, "resync-interval", 60*time.Second, "periodic full resolution, the backstop for missed events (0 disables)")
	fs.DurationVar(&reconcile, "reconcile-interval", 0, "deprecated alias of --resync-interval (local-ccm)")
	fs.Float64Var(&o.publishRate, "publish-rate", 1, "sustained Node writes per second")
	fs.IntVar(&o.publishBurst, "publish-burst", 3, "Node writes allowed in a burst")
	fs.BoolVar(&o.removeTaint, "remove-taint", true, "remove the node.cloudprovider.kubernetes.io/uninitialized taint once the addresses are set")
	fs.BoolVar(&o.runOnce, "run-once", false, "reconcile once and exit (0 on success, 1 on failure)")
	fs.DurationVar(&o.timeout, "timeout", 30*time.Second, "with --run-once: how long to wait for the Node and retry")
	fs.BoolVar(&o.dryRun, "dry-run", false, "print the desired addresses as JSON lines on stdout instead of writing the Node; needs no cluster")
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", ":9810", "address for /metrics (0 disables)")
	fs.StringVar(&o.probeAddr, "health-probe-bind-address", "127.0.0.1:9811", "address for /healthz and /readyz (0 disables); loopback, where the kubelet probes with httpGet.host 127.0.0.1")
	o.addFlags(fs)
	o.discovery.addFlags(fs)
	fs.StringVar(&logLevel, "log-level", "info", "log level: debug, info, warn or error")
	fs.StringVar(&o.logFormat, "log-format", "text", "log format: text or json")
	fs.IntVar(&v, "v", -1, "local-ccm verbosity (0-5), mapped to --log-level: 0 info, 1 and more debug")
	fs.BoolVar(&o.version, "version", false, "print the version and exit")
	fs.DurationVar(&o.overwriteBackoff, "overwrite-backoff", 10*time.Second, "first delay before rewriting addresses another writer (e.g. a kubelet without --cloud-provider=external) keeps reverting; doubles with each further revert")
	fs.DurationVar(&o.overwriteMax, "overwrite-backoff-max", 10*time.Minute, "longest delay before rewriting reverted addresses")
	fs.IntVar(&o.netlinkRcvBuf, "netlink-receive-buffer", 4<<20, "requested netlink socket receive buffer in bytes (capped by net.core.rmem_max)")
	type typeFlags struct{ interfaces, exclude, cidrs string }
	perType := map[resolver.AddressType]*typeFlags{resolver.InternalIP: {}, resolver.ExternalIP: {}}
	for _, t := range []resolver.AddressType{resolver.InternalIP, resolver.ExternalIP} {
		pre, tf := flagPrefix(t), perType[t]
		fs.StringVar(&tf.interfaces, pre+"-interfaces", "", "comma-separated regular expressions (anchored) of interfaces whose addresses are "+string(t)+" candidates besides the route source")
		fs.StringVar(&tf.exclude, pre+"-exclude-interfaces", "", "comma-separated regular expressions (anchored) of interfaces never used for "+string(t)+", added to the default exclusions")
		fs.StringVar(&tf.cidrs, pre+"-cidrs", "", "ordered comma-separated CIDRs for "+string(t)+": the first matching one gives the priority, !CIDR rejects; alone, they select from every interface")
	}
	fs.BoolVar(&o.allowSecondary, "allow-secondary", false, "accept IPv4 secondary addresses (keepalived and kube-vip add VIPs as secondaries)")
	fs.BoolVar(&o.defaultExclusions, "default-exclusions", true, "exclude container/CNI interfaces ("+strings.Join(resolver.DefaultExcludeInterfaces, " ")+"), the Node's pod CIDRs and VIP-style addresses (/32 on lo, labelled aliases, a /32 beside a wider address)")
	var serviceCIDR string
	fs.StringVar(&serviceCIDR, "service-cidr", "", "the cluster's service CIDR(s), comma-separated: never a node address")
	var annotations string
	fs.StringVar(&annotations, "annotations", getenv("NODEADDR_ANNOTATIONS"), "Node annotations to publish the addresses in (env NODEADDR_ANNOTATIONS): comma-separated presets ("+strings.Join(publisher.PresetNames(), ", ")+") and KEY=FORMAT items, FORMAT internal-|external- + ipv4, ipv6, ips, ipv4-cidr or ipv6-cidr")

	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(out, "Usage: nodeaddr [flags]\n\nKeeps this Node's status.addresses in step with the kernel.\n\nFlags:")
			fs.SetOutput(out)
			fs.PrintDefaults()
			return nil, err
		}
		// One line, whatever the user typed: a flag name may contain a newline.
		return nil, usageError{strings.ReplaceAll(flagMessage(err), "\n", `\n`)}
	}
	if fs.NArg() > 0 {
		return nil, usagef("unexpected argument %q: nodeaddr takes only flags", fs.Arg(0))
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if o.version {
		return o, nil
	}

	var err error
	o.typePolicy = map[resolver.AddressType]resolver.TypePolicy{}
	for _, t := range []resolver.AddressType{resolver.InternalIP, resolver.ExternalIP} {
		pre, tf := flagPrefix(t), perType[t]
		var tp resolver.TypePolicy
		if tp.Interfaces, err = resolver.ParseInterfaceRegexps(tf.interfaces); err != nil {
			return nil, usagef("--%s-interfaces: %v", pre, err)
		}
		if tp.ExcludeInterfaces, err = resolver.ParseInterfaceRegexps(tf.exclude); err != nil {
			return nil, usagef("--%s-exclude-interfaces: %v", pre, err)
		}
		if tp.CIDRs, err = resolver.ParseCIDRRules(tf.cidrs); err != nil {
			return nil, usagef("--%s-cidrs: %v", pre, err)
		}
		if o.defaultExclusions {
			tp.ExcludeInterfaces = append(resolver.MustInterfaceRegexps(resolver.DefaultExcludeInterfaces...), tp.ExcludeInterfaces...)
		}
		// InternalIP is the node's identity: it stays while the host has it (TypePolicy.Sticky).
		tp.Sticky = t == resolver.InternalIP
		o.typePolicy[t] = tp
	}
	if o.internalTargets, err = o.parseTargets(resolver.InternalIP, internal, perType[resolver.InternalIP].interfaces); err != nil {
		return nil, err
	}
	if o.externalTargets, err = o.parseTargets(resolver.ExternalIP, external, perType[resolver.ExternalIP].interfaces); err != nil {
		return nil, err
	}
	switch externalEqual {
	case "drop":
	case "keep":
		o.keepExternalEqualInternal = true
	default:
		return nil, usagef("--external-ip-equal-internal: %q is not drop or keep", externalEqual)
	}
	if o.serviceCIDRs, err = resolver.ParsePrefixes(serviceCIDR); err != nil {
		return nil, usagef("--service-cidr: %v", err)
	}
	if len(o.managed()) == 0 {
		for _, name := range []string{"internal-ip-interfaces", "internal-ip-cidrs", "external-ip-interfaces", "external-ip-cidrs"} {
			if v := fs.Lookup(name).Value.String(); strings.Trim(v, ", ") != "" {
				return nil, usagef("--%s: nothing to manage: no target, interface or accepting CIDR for InternalIP or ExternalIP", name)
			}
		}
		return nil, usagef("--internal-ip-target and --external-ip-target are both none: nothing to manage")
	}
	for _, t := range []resolver.AddressType{resolver.InternalIP, resolver.ExternalIP} {
		if slices.Contains(o.managed(), t) {
			continue
		}
		// Set but empty is fine (a Helm chart passes every flag).
		for _, f := range []struct{ name, v string }{{"exclude-interfaces", perType[t].exclude}, {"cidrs", perType[t].cidrs}} {
			if name := f.name; strings.Trim(f.v, ", ") != "" {
				return nil, usagef("--%s-%s: %s is not managed (it has no --%s-target, --%s-interfaces or accepting --%s-cidrs)",
					flagPrefix(t), name, t, flagPrefix(t), flagPrefix(t), flagPrefix(t))
			}
		}
	}
	if o.annotations, err = publisher.ParseAnnotations(annotations, o.managed()); err != nil {
		return nil, usagef("--annotations: %v", err)
	}
	if set["reconcile-interval"] {
		if set["resync-interval"] {
			return nil, usagef("--reconcile-interval is a deprecated alias of --resync-interval: set only one")
		}
		if reconcile < 0 {
			return nil, usagef("--reconcile-interval: %s is negative", reconcile)
		}
		o.resyncInterval = reconcile
		o.deprecations = append(o.deprecations, "--reconcile-interval is deprecated, use --resync-interval")
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"debounce", o.debounce}, {"debounce-max-delay", o.debounceMaxDelay}, {"removal-grace", o.removalGrace},
		{"resync-interval", o.resyncInterval}, {"timeout", o.timeout},
		{"overwrite-backoff", o.overwriteBackoff}, {"overwrite-backoff-max", o.overwriteMax}} {
		if d.v < 0 {
			return nil, usagef("--%s: %s is negative", d.name, d.v)
		}
	}
	if o.debounceMaxDelay > 0 && o.debounceMaxDelay < o.debounce {
		return nil, usagef("--debounce-max-delay (%s) is shorter than --debounce (%s)", o.debounceMaxDelay, o.debounce)
	}
	if o.overwriteBackoff == 0 {
		return nil, usagef("--overwrite-backoff must be positive")
	}
	if o.overwriteMax < o.overwriteBackoff {
		return nil, usagef("--overwrite-backoff-max (%s) is shorter than --overwrite-backoff (%s)", o.overwriteMax, o.overwriteBackoff)
	}
	if o.timeout == 0 {
		return nil, usagef("--timeout must be positive")
	}
	if !(o.publishRate > 0) {
		return nil, usagef("--publish-rate: %v is not a positive number of writes per second", o.publishRate)
	}
	if o.publishBurst < 1 {
		return nil, usagef("--publish-burst: %d is less than 1", o.publishBurst)
	}
	if o.netlinkRcvBuf < 0 {
		return nil, usagef("--netlink-receive-buffer: %d is negative", o.netlinkRcvBuf)
	}
	if set["v"] {
		if v < 0 || v > 10 {
			return nil, usagef("--v: %d is not a verbosity between 0 and 10", v)
		}
		if !set["log-level"] {
			logLevel = "info"
			if v >= 1 {
				logLevel = "debug"
			}
		}
	}
	if err := o.logLevel.UnmarshalText([]byte(logLevel)); err != nil {
		return nil, usagef("--log-level: %q is not one of debug, info, warn, error", logLevel)
	}
	if o.logFormat != "text" && o.logFormat != "json" {
		return nil, usagef("--log-format: %q is not text or json", o.logFormat)
	}
	for _, a := range []struct{ name, v string }{{"metrics-bind-address", o.metricsAddr}, {"health-probe-bind-address", o.probeAddr}} {
		if a.v != "0" && a.v != "" && !strings.Contains(a.v, ":") {
			return nil, usagef("--%s: %q is not host:port or 0", a.name, a.v)
		}
	}
	if err := o.validate(o.metricsAddr); err != nil {
		return nil, err
	}
	if err := o.discovery.validate(); err != nil {
		return nil, err
	}
	if o.kubeconfig == "" {
		o.kubeconfig = getenv("KUBECONFIG")
	}
	o.nodeName = strings.TrimSpace(o.nodeName)
	if o.nodeName == "" {
		if !o.dryRun {
			return nil, usagef("--node-name (or NODE_NAME) is required")
		}
		h, err := hostname()
		if err != nil {
			return nil, usagef("--node-name not set and the hostname is unknown: %v", err)
		}
		o.nodeName = strings.ToLower(h)
	}
	return o, nil
}

// parseTargets reads a --*-ip-target value for type t: "none" leaves t unmanaged (an error when
// the type's interfaces are set too), empty means defaultTargets, except for InternalIP chosen by
// --internal-ip-interfaces or an accepting --internal-ip-cidrs, which keep selecting only from
// interfaces as they did before InternalIP had default targets. Call it after typePolicy is set.
func (o *options) parseTargets(t resolver.AddressType, value, interfaces string) ([]resolver.Target, error) {
	pre := flagPrefix(t)
	v := strings.TrimSpace(value)
	if strings.EqualFold(v, noTargets) {
		if o.enumerates(t) {
			what := "--" + pre + "-cidrs"
			if strings.Trim(interfaces, ", ") != "" {
				what = "--" + pre + "-interfaces"
			}
			return nil, usagef("--%s-target=none leaves %s unmanaged, but %s selects addresses for it: drop one of them", pre, t, what)
		}
		return nil, nil
	}
	if strings.Trim(v, ", ") == "" {
		if t == resolver.InternalIP && o.enumerates(t) {
			return nil, nil
		}
		v = defaultTargets
	}
	ts, err := resolver.ParseTargets(t, v)
	if err != nil {
		return nil, usagef("--%s-target: %v", pre, err)
	}
	return ts, nil
}

// flagMessage rewrites the flag package's errors into "--name: problem" lines.
func flagMessage(err error) string {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: "); ok {
		return "unknown flag " + "--" + strings.TrimLeft(name, "-")
	}
	if rest, ok := strings.CutPrefix(msg, "invalid value "); ok {
		// invalid value "x" for flag -name: reason
		if i := strings.Index(rest, " for flag -"); i >= 0 {
			val := rest[:i]
			tail := rest[i+len(" for flag -"):]
			name, reason, _ := strings.Cut(tail, ": ")
			return fmt.Sprintf("--%s: invalid value %s: %s", name, val, reason)
		}
	}
	if rest, ok := strings.CutPrefix(msg, "invalid boolean value "); ok {
		// invalid boolean value "x" for -name: reason
		if val, tail, ok := strings.Cut(rest, " for -"); ok {
			name, reason, _ := strings.Cut(tail, ": ")
			return fmt.Sprintf("--%s: invalid value %s: %s", name, val, reason)
		}
	}
	if name, ok := strings.CutPrefix(msg, "flag needs an argument: "); ok {
		return "--" + strings.TrimLeft(name, "-") + " needs a value"
	}
	return msg
}

// flagPrefix is the flag-name prefix of an address type: internal-ip or external-ip.
func flagPrefix(t resolver.AddressType) string {
	if t == resolver.InternalIP {
		return "internal-ip"
	}
	return "external-ip"
}

// managed lists the types nodeaddr owns: those with a target or an interface source.
func (o *options) managed() []resolver.AddressType {
	var m []resolver.AddressType
	if len(o.internalTargets) > 0 || o.enumerates(resolver.InternalIP) {
		m = append(m, resolver.InternalIP)
	}
	if len(o.externalTargets) > 0 || o.enumerates(resolver.ExternalIP) {
		m = append(m, resolver.ExternalIP)
	}
	return m
}

func (o *options) enumerates(t resolver.AddressType) bool {
	tp := o.typePolicy[t]
	return len(tp.Interfaces) > 0 || slices.ContainsFunc(tp.CIDRs, func(r resolver.CIDRRule) bool { return !r.Exclude })
}

// policy is the selection policy the flags describe (pod CIDRs are added at run time).
func (o *options) policy() resolver.Policy {
	return resolver.Policy{
		Managed: o.managed(), Targets: o.targets(), Types: o.typePolicy,
		AllowSecondary: o.allowSecondary, AllowVIPs: !o.defaultExclusions,
		ExcludeCIDRs: o.serviceCIDRs,
	}
}

func (o *options) targets() []resolver.Target {
	return append(append([]resolver.Target(nil), o.internalTargets...), o.externalTargets...)
}

// nodeView is what the resolver takes from the Node: without --default-exclusions its pod CIDRs
// are not excluded.
func (o *options) nodeView(v resolver.NodeView) resolver.NodeView {
	if !o.defaultExclusions {
		v.PodCIDRs = nil
	}
	return v
}
