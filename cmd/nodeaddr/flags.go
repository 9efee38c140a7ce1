package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"strings"
	"time"

	"github.com/spf13/pflag"

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
	linkDebounce     time.Duration
	removalGrace     time.Duration
	resyncInterval   time.Duration
	publishRate      float64
	publishBurst     int
	removeTaint      bool
	approvalRecord   bool // --approval-record (or the deprecated --approve-kubelet-serving-csr)
	runOnce          bool
	timeout          time.Duration
	dryRun           bool
	explain          bool   // --explain: why each address was chosen or dropped (dry run only)
	output           string // -o/--output: the explanation's format, text or json
	metricsAddr      string
	probeAddr        string
	logLevel         slog.Level
	// verbosity is --v: klog's verbosity (client-go logs its requests at 6).
	verbosity        int
	logFormat        string
	version          bool
	help             bool // --help (-h and -help are pflag's ErrHelp)
	netlinkRcvBuf    int
	overwriteBackoff time.Duration
	overwriteMax     time.Duration
	deprecations     []string
	warnings         []string // about a combination of flags that is valid but likely not meant

	// Selection policy (docs/configuration.md, "Selection policy").
	typePolicy        map[resolver.AddressType]resolver.TypePolicy
	allowSecondary    bool
	defaultExclusions bool
	serviceCIDRs      []netip.Prefix

	annotations []publisher.AnnotationSpec
	// keepExternalEqualInternal is --external-ip-equal-internal=keep.
	keepExternalEqualInternal bool

	listenerOptions
	discovery discoveryOptions
	check     checkOptions // --check-install
}

// usageError is a bad command line: exit code 2, one line on stderr.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

// parseFlags parses args (without the program name). getenv supplies NODE_NAME, KUBECONFIG and
// NODEADDR_ANNOTATIONS; hostname the dry-run default node name. -h/--help returns pflag.ErrHelp
// after printing usage to out.
func parseFlags(args []string, getenv func(string) string, hostname func() (string, error), out io.Writer) (*options, error) {
	o := &options{}
	r := &rawFlags{}
	groups := o.defineFlags(r, envDefaults(getenv))
	fs := groups.all()
	markDeprecated(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) { // -h or -help, which pflag answers itself
			groups.printUsage(out)
			return nil, err
		}
		// One line, whatever the user typed: a flag name may contain a newline.
		return nil, usageError{strings.ReplaceAll(flagMessage(fs, err), "\n", `\n`)}
	}
	if o.help {
		groups.printUsage(out)
		return nil, pflag.ErrHelp
	}
	if fs.NArg() > 0 {
		return nil, usagef("unexpected argument %q: nodeaddr takes only flags", fs.Arg(0))
	}
	if o.version {
		return o, nil
	}
	if err := o.checkModes(fs); err != nil {
		return nil, err
	}
	if o.check.enabled { // a mode of its own: no Node, no selection policy
		if o.kubeconfig == "" {
			o.kubeconfig = getenv("KUBECONFIG")
		}
		if o.timeout <= 0 {
			return nil, usagef("--timeout must be positive")
		}
		return o, o.check.validate()
	}
	if err := o.buildPolicy(fs, r); err != nil {
		return nil, err
	}
	if err := o.applyCompat(fs, r); err != nil {
		return nil, err
	}
	if err := o.validateFlags(fs, r); err != nil {
		return nil, err
	}
	if err := o.applyEnv(getenv, hostname); err != nil {
		return nil, err
	}
	o.applyDryRunListeners(fs)
	return o, nil
}

// rawFlags hold the flag values that become options only after parsing or cross-checks.
type rawFlags struct {
	internal, external, externalEqual  string
	logLevel, serviceCIDR, annotations string
	reconcile                          time.Duration
	v                                  int
	perType                            map[resolver.AddressType]*typeFlags
}

// typeFlags are the selection flags of one address type.
type typeFlags struct{ interfaces, exclude, cidrs string }

// flagPrefix is the flag-name prefix of an address type: internal-ip or external-ip.
func flagPrefix(t resolver.AddressType) string {
	if t == resolver.InternalIP {
		return "internal-ip"
	}
	return "external-ip"
}
