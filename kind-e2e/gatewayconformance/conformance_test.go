//go:build conformance

package gatewayconformance

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/gateway-api/apis/v1alpha2"
	"sigs.k8s.io/gateway-api/apis/v1alpha3"
	xv1alpha1 "sigs.k8s.io/gateway-api/apisx/v1alpha1"
	"sigs.k8s.io/gateway-api/conformance"
	confv1 "sigs.k8s.io/gateway-api/conformance/apis/v1"
	"sigs.k8s.io/gateway-api/conformance/tests"
	"sigs.k8s.io/gateway-api/conformance/utils/config"
	"sigs.k8s.io/gateway-api/conformance/utils/flags"
	"sigs.k8s.io/gateway-api/conformance/utils/roundtripper"
	"sigs.k8s.io/gateway-api/conformance/utils/suite"
	"sigs.k8s.io/gateway-api/pkg/features"
	"sigs.k8s.io/yaml"
)

// gatewayClass is the class the chart has the operator create.
const gatewayClass = "tailscale"

// reportPath is where the report goes, relative to the repository root
// (-report-output sets another).
const reportPath = "docs/conformance/gateway-api-v1.6.3-report.yaml"

func TestGatewayConformance(t *testing.T) {
	assets := os.Getenv("TAILPLANE_TEST_ASSETS")
	if assets == "" {
		t.Fatal("TAILPLANE_TEST_ASSETS is not set: run `go tool task test:assets test:node` and export TAILPLANE_TEST_ASSETS=$(go tool task test:assets-dir)")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	work := t.TempDir()
	imports := append([]string{productImages(ctx, t, root)}, standInArchives(ctx, t, work)...)
	c := startCluster(ctx, t, root, assets, imports)
	node := joinTailnet(ctx, t, c)
	joinHost(ctx, t, c, assets)

	opts := suiteOptions(t, c, root)
	opts.RoundTripper = &roundtripper.DefaultRoundTripper{Debug: opts.Debug, TimeoutConfig: opts.TimeoutConfig, CustomDialContext: node.Dial}
	grpcClient := &tailnetGRPC{dial: node.Dial}
	defer grpcClient.Close()
	opts.GRPCClient = grpcClient
	opts.WebSocketDialer = tailnetWebSocket{ctx: ctx, dial: node.Dial}
	results := &testResults{}
	opts.Hook = results.record
	cs, err := suite.NewConformanceTestSuite(opts)
	if err != nil {
		t.Fatalf("the conformance suite: %v", err)
	}
	// Registered after the cluster's stop, so it runs before it: the
	// report and the table are written whatever failed.
	setupOK := false
	t.Cleanup(func() {
		writeReport(t, cs, opts.ReportOutputPath)
		table := results.table(tests.ConformanceTests, opts.SupportedFeatures, !setupOK)
		writeResults(t, filepath.Join(filepath.Dir(opts.ReportOutputPath), filepath.Base(resultsPath)), opts.Implementation.Version, table)
	})

	// Setup is a subtest so that the backends and the clients' way over
	// the tailnet are checked even when it fails (until Gateways are served
	// it fails at its last step, the base Gateways' Programmed condition).
	setupOK = t.Run("Setup", func(t *testing.T) { cs.Setup(t, tests.ConformanceTests) })
	kube := kubernetes.NewForConfigOrDie(opts.RestConfig)
	t.Run("Backends", func(t *testing.T) { checkBackends(ctx, t, kube, opts.TimeoutConfig) })
	t.Run("TailnetPath", func(t *testing.T) {
		checkTailnetPath(ctx, t, kube, opts.RoundTripper, opts.GRPCClient, opts.TimeoutConfig)
	})
	if !setupOK {
		t.Fatalf("the suite's Setup failed (above), so none of its %d tests ran: the report, written next, has no profile results, and the table says \"not run\"", len(tests.ConformanceTests))
	}
	t.Run("Suite", func(t *testing.T) {
		if err := cs.Run(t, tests.ConformanceTests); err != nil {
			t.Fatalf("the conformance suite: %v", err)
		}
	})
}

// suiteOptions are the suite's options for the cluster: the clients as the
// suite's DefaultOptions makes them, Tailplane's class, profiles, features
// and implementation, then the suite's own flags given after -args.
func suiteOptions(t *testing.T, c *cluster, root string) suite.ConformanceOptions {
	t.Helper()
	g := NewWithT(t)
	// controller-runtime complains once when no logger is set; the
	// suite logs through t.
	ctrllog.SetLogger(logr.Discard())
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(c.dir, "kubeconfig"))
	g.Expect(err).NotTo(HaveOccurred())
	// The suite's parallel tests poll statuses at once: client-go's
	// default 5 requests/s would have them wait on the client's rate
	// limiter, not on the operator.
	cfg.QPS, cfg.Burst = 50, 100
	cl, err := client.New(cfg, client.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	for _, install := range []func(*runtime.Scheme) error{v1alpha3.Install, v1alpha2.Install, xv1alpha1.Install, gatewayv1.Install, apiextensionsv1.AddToScheme} {
		g.Expect(install(cl.Scheme())).To(Succeed())
	}
	opts := suite.ConformanceOptions{
		ConfigurableOptions: suite.ConfigurableOptions{
			GatewayClassName:     gatewayClass,
			CleanupBaseResources: false, // the cluster goes with the test
			CleanupTestResources: true,
			SupportedFeatures:    waitAccepted(t, cl),
			ConformanceProfiles:  profiles(),
			Mode:                 flags.DefaultMode,
			TimeoutConfig:        config.DefaultTimeoutConfig(),
			ReportOutputPath:     filepath.Join(root, reportPath),
			Implementation: confv1.Implementation{
				Organization: "tailplane", Project: "tailplane", URL: "https://github.com/tailplane/tailplane",
				Version: commit(t, root), Contact: []string{"https://github.com/tailplane/tailplane/issues"},
			},
		},
		Client: cl, Clientset: kubernetes.NewForConfigOrDie(cfg), RestConfig: cfg,
		ManifestFS: []fs.FS{&conformance.Manifests},
	}
	flags.ApplyAll(&opts.ConfigurableOptions)
	t.Logf("conformance: class %s, profiles %v, features %v, report %s", opts.GatewayClassName, opts.ConformanceProfiles, opts.SupportedFeatures, opts.ReportOutputPath)
	return opts
}

// waitAccepted waits for the operator to create the class and accept it,
// and returns the features its status claims: the suite checks exactly
// those (the suite's -supported-features flag overrides them). The suite's
// Setup checks acceptance again, with its own timeout.
func waitAccepted(t *testing.T, cl client.Client) []features.FeatureName {
	t.Helper()
	var claimed []features.FeatureName
	NewWithT(t).Eventually(func(g Gomega) {
		var gc gatewayv1.GatewayClass
		g.Expect(cl.Get(t.Context(), client.ObjectKey{Name: gatewayClass}, &gc)).To(Succeed())
		g.Expect(gc.Status.Conditions).To(ContainElement(SatisfyAll(
			HaveField("Type", string(gatewayv1.GatewayClassConditionStatusAccepted)),
			HaveField("Status", metav1.ConditionTrue),
		)), "GatewayClass %s: %+v", gatewayClass, gc.Status.Conditions)
		g.Expect(gc.Status.SupportedFeatures).NotTo(BeEmpty(), "GatewayClass %s claims no features", gatewayClass)
		claimed = claimed[:0]
		for _, f := range gc.Status.SupportedFeatures {
			claimed = append(claimed, features.FeatureName(f.Name))
		}
	}).WithTimeout(3 * time.Minute).WithPolling(2 * time.Second).Should(Succeed())
	return claimed
}

// commit is the implementation's version in the report: the checked-out
// commit, with "-dirty" for uncommitted changes.
func commit(t *testing.T, root string) string {
	t.Helper()
	out, err := exec.CommandContext(t.Context(), "git", "-C", root, "describe", "--always", "--dirty").Output()
	if err != nil {
		t.Fatalf("git describe: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// writeReport writes the suite's ConformanceReport as YAML, as the
// suite's upstream runner does.
func writeReport(t *testing.T, cs *suite.ConformanceTestSuite, path string) {
	report, err := cs.Report()
	if err != nil {
		t.Errorf("the conformance report: %v", err)
		return
	}
	b, err := yaml.Marshal(report)
	if err != nil {
		t.Errorf("the conformance report: %v", err)
		return
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Errorf("the conformance report: %v", err)
		return
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Errorf("the conformance report: %v", err)
		return
	}
	t.Logf("conformance report written to %s:\n%s", path, b)
}
