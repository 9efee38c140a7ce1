package agentcmd

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"
	"golang.org/x/time/rate"

	"github.com/nodeaddr/nodeaddr/internal/cmd/cli"
	"github.com/nodeaddr/nodeaddr/internal/vocab"
	"github.com/nodeaddr/nodeaddr/publisher"
	"github.com/nodeaddr/nodeaddr/resolver"
)

// publishOptions are the Publishing section's flags: how the Node is written.
type publishOptions struct {
	publishRate                    float64
	publishBurst                   int
	removeTaint                    bool
	approvalRecord                 bool // also set by the deprecated --approve-kubelet-serving-csr
	rawAnnotations                 string
	annotations                    []vocab.AnnotationSpec
	overwriteBackoff, overwriteMax time.Duration
}

func (p *publishOptions) addFlags(fs *pflag.FlagSet, getenv func(string) string) {
	fs.Float64Var(&p.publishRate, "publish-rate", 1, "sustained Node writes per second")
	fs.IntVar(&p.publishBurst, "publish-burst", 3, "Node writes allowed in a burst")
	fs.BoolVar(&p.removeTaint, "remove-taint", true, "remove the node.cloudprovider.kubernetes.io/uninitialized taint once the addresses are set")
	fs.BoolVar(&p.approvalRecord, "approval-record", false, "also write the annotation "+vocab.RecordAnnotation+": the IPs nodeaddr wrote into status.addresses, which the central approver (nodeaddr approver, deploy/components/kubelet-serving-csr) approves kubelet-serving certificates for")
	fs.BoolVar(&p.approvalRecord, "approve-kubelet-serving-csr", false, "deprecated: approval moved to the central approver; the same as --approval-record")
	_ = fs.MarkDeprecated("approve-kubelet-serving-csr", "the agents no longer approve CSRs: run the central approver (nodeaddr approver, deploy/components/kubelet-serving-csr); the flag now means --approval-record")
	fs.StringVar(&p.rawAnnotations, "annotations", getenv("NODEADDR_ANNOTATIONS"), "Node annotations to publish the addresses in (env NODEADDR_ANNOTATIONS): comma-separated presets ("+strings.Join(vocab.PresetNames(), ", ")+") and KEY=FORMAT items, FORMAT internal-|external- + ipv4, ipv6, ips, ipv4-cidr or ipv6-cidr")
	fs.DurationVar(&p.overwriteBackoff, "overwrite-backoff", 10*time.Second, "first delay before rewriting addresses another writer (e.g. a kubelet without --cloud-provider=external) keeps reverting; doubles with each further revert")
	fs.DurationVar(&p.overwriteMax, "overwrite-backoff-max", 10*time.Minute, "longest delay before rewriting reverted addresses")
}

// parseAnnotations parses --annotations for the managed types, and adds --approval-record's.
func (p *publishOptions) parseAnnotations(managed []resolver.AddressType) error {
	var err error
	if p.annotations, err = vocab.ParseAnnotations(p.rawAnnotations, managed); err != nil {
		return cli.Usagef("--annotations: %v", err)
	}
	if p.approvalRecord {
		if slices.ContainsFunc(p.annotations, func(a vocab.AnnotationSpec) bool { return a.Key == vocab.RecordAnnotation }) {
			return cli.Usagef("--annotations names %s, which --approval-record writes itself", vocab.RecordAnnotation)
		}
		p.annotations = append(p.annotations, vocab.RecordSpec())
	}
	return nil
}

func (p *publishOptions) validate(fs *pflag.FlagSet) error {
	if err := negative(fs, "overwrite-backoff", "overwrite-backoff-max"); err != nil {
		return err
	}
	// The first that fails is the error, in this order.
	for _, c := range []struct {
		bad bool
		msg string
	}{
		{p.overwriteBackoff == 0, "--overwrite-backoff must be positive"},
		{p.overwriteMax < p.overwriteBackoff, fmt.Sprintf(
			"--overwrite-backoff-max (%s) is shorter than --overwrite-backoff (%s)", p.overwriteMax, p.overwriteBackoff)},
		{!(p.publishRate > 0),
			fmt.Sprintf("--publish-rate: %v is not a positive number of writes per second", p.publishRate)},
		{p.publishBurst < 1, fmt.Sprintf("--publish-burst: %d is less than 1", p.publishBurst)},
	} {
		if c.bad {
			return cli.UsageError{Msg: c.msg}
		}
	}
	return nil
}

// publisherConfig is the publisher's configuration.
func (p *publishOptions) publisherConfig(log *slog.Logger, reg prometheus.Registerer) publisher.Config {
	return publisher.Config{
		RemoveTaint: p.removeTaint,
		Annotations: p.annotations, Rate: rate.Limit(p.publishRate), Burst: p.publishBurst,
		Logger: log, Metrics: publisher.NewMetrics(reg),
		OverwriteBackoff: p.overwriteBackoff, OverwriteBackoffMax: p.overwriteMax,
	}
}
