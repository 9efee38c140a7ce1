// Package e2esuite is Kubernetes' own end-to-end suite trimmed to the test packages whose tests
// depend on Node addresses (test/e2e/network, test/e2e/common/node). It mirrors
// k8s.io/kubernetes/test/e2e/e2e_test.go and e2e.go of the release it is built against, without the
// cloud providers and the other SIGs' packages, so that it compiles in a fraction of the time.
// The harness copies it into a generated build module and runs `go test -c` there
// (test/harness/e2ebuild.go); it lives under testdata so that the test module never compiles it.
package e2esuite

import (
	"context"
	"flag"
	"fmt"
	"os"
	"testing"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-base/logs"
	"k8s.io/component-base/version"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/test/e2e/framework"
	"k8s.io/kubernetes/test/e2e/framework/config"
	e2enode "k8s.io/kubernetes/test/e2e/framework/node"
	e2epod "k8s.io/kubernetes/test/e2e/framework/pod"
	"k8s.io/kubernetes/test/e2e/framework/testfiles"
	e2etestingmanifests "k8s.io/kubernetes/test/e2e/testing-manifests"
	utilnet "k8s.io/utils/net"

	_ "k8s.io/client-go/plugin/pkg/client/auth"
	_ "k8s.io/component-base/logs/testinit"

	// define and freeze constants
	_ "k8s.io/kubernetes/test/e2e/feature"

	// test sources: only the packages of the focus list (harness.E2EFocus)
	_ "k8s.io/kubernetes/test/e2e/common/node"
	_ "k8s.io/kubernetes/test/e2e/network"

	// reconfigure framework
	_ "k8s.io/kubernetes/test/e2e/framework/debug/init"
	_ "k8s.io/kubernetes/test/e2e/framework/metrics/init"
	_ "k8s.io/kubernetes/test/e2e/framework/node/init"
	_ "k8s.io/kubernetes/test/utils/ktesting/format"
)

func TestMain(m *testing.M) {
	versionFlag := flag.CommandLine.Bool("version", false, "Displays version information.")
	config.CopyFlags(config.Flags, flag.CommandLine)
	framework.RegisterCommonFlags(flag.CommandLine)
	framework.RegisterClusterFlags(flag.CommandLine)
	flag.Parse()
	if *versionFlag {
		fmt.Printf("%s\n", version.Get())
		os.Exit(0)
	}
	if flag.CommandLine.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "unknown additional command line arguments: %s", flag.CommandLine.Args())
		os.Exit(1)
	}
	testfiles.AddFileSource(e2etestingmanifests.GetE2ETestingManifestsFS())
	framework.AfterReadingAllFlags(&framework.TestContext)
	os.Exit(m.Run())
}

func TestE2E(t *testing.T) {
	logs.InitLogs()
	defer logs.FlushLogs()
	klog.EnableContextualLogging(true)
	gomega.RegisterFailHandler(framework.Fail)
	suiteConfig, reporterConfig := framework.CreateGinkgoConfig()
	ginkgo.RunSpecs(t, "Kubernetes e2e suite (nodeaddr's focus)", suiteConfig, reporterConfig)
}

// The suite setup of test/e2e/e2e.go without what needs a cloud: wait for schedulable nodes, count
// them, wait for kube-system's pods, and learn the cluster's IP family from the kubernetes Service.
var _ = ginkgo.SynchronizedBeforeSuite(func(ctx context.Context) []byte {
	c, err := framework.LoadClientset()
	framework.ExpectNoError(err, "Error loading client")
	timeouts := framework.NewTimeoutContext()
	framework.ExpectNoError(e2enode.WaitForAllNodesSchedulable(ctx, c, timeouts.NodeSchedulable))
	if framework.TestContext.CloudConfig.NumNodes == framework.DefaultNumNodes {
		nodes, err := e2enode.GetReadySchedulableNodes(ctx, c)
		framework.ExpectNoError(err)
		framework.TestContext.CloudConfig.NumNodes = len(nodes.Items)
	}
	framework.ExpectNoError(e2epod.WaitForAlmostAllPodsReady(ctx, c, metav1.NamespaceSystem,
		framework.TestContext.MinStartupPods, framework.TestContext.AllowedNotReadyNodes, timeouts.SystemPodsStartup))
	framework.Logf("e2e test version: %s", version.Get().GitVersion)
	return nil
}, func(ctx context.Context, _ []byte) {
	c, err := framework.LoadClientset()
	framework.ExpectNoError(err, "Error loading client")
	svc, err := c.CoreV1().Services(metav1.NamespaceDefault).Get(ctx, "kubernetes", metav1.GetOptions{})
	framework.ExpectNoError(err, "Failed to get kubernetes service ClusterIP")
	framework.TestContext.IPFamily = "ipv4"
	if utilnet.IsIPv6String(svc.Spec.ClusterIP) {
		framework.TestContext.IPFamily = "ipv6"
	}
	framework.Logf("Cluster IP family: %s", framework.TestContext.IPFamily)
})
