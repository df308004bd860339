package official

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/charmbracelet/log"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// Config says where the run finds and keeps things, and how much it measures.
type Config struct {
	// Root is the repository; Assets the folder of devcluster, tailscaled
	// and the tailscale CLI (go tool task test:assets test:tailscale
	// test:node); Work the run's folder (binaries, images, the cluster, logs).
	Root, Assets, Work string
	// Runs is how many times each exposure is timed per operator.
	Runs int
	// Services is how many LoadBalancer Services the memory and clean-up
	// lines expose at once per operator; 0 leaves those lines out.
	Services int
	// LoadFor is how long the L7 load runs per proxy, with LoadWorkers
	// concurrent clients.
	LoadFor     time.Duration
	LoadWorkers int
	// SocksAddr is where `devcluster join` serves its SOCKS5 proxy.
	SocksAddr string
	// Cases are the parts of the run to do (CaseDedicated, ...); empty
	// does them all.
	Cases []string
	// ScaleServices and ScaleIngresses are the parents of the scale part
	// (Scale), which runs instead of the cases when Audit is set.
	ScaleServices, ScaleIngresses int
	// Audit starts the API server with an audit log (AuditPolicy), from
	// which the scale part counts each operator's requests.
	Audit bool
}

// The parts of a run, for Config.Cases.
const (
	// CaseDedicated: the seed's Ingress and LoadBalancer Service, timed
	// Runs times, under load, and compared.
	CaseDedicated = "dedicated"
	// CaseExpose: the Service annotated tailscale.com/expose, compared.
	CaseExpose = "expose"
	// CaseProxyGroup: an ingress ProxyGroup with a Service and an Ingress
	// member, compared.
	CaseProxyGroup = "proxygroup"
	// CaseServices: Services LoadBalancer Services at once per operator.
	CaseServices = "services"
)

// AllCases are the parts of a run, in the order they run.
func AllCases() []string { return []string{CaseDedicated, CaseExpose, CaseProxyGroup, CaseServices} }

// Does says whether the run does the part name.
func (c Config) Does(name string) bool { return len(c.Cases) == 0 || slices.Contains(c.Cases, name) }

// Env is the running side-by-side setup.
type Env struct {
	Cfg     Config
	Cluster *Cluster
	Tailnet TailnetEnv
	// Probe (fresh connection per request) and Keep (keep-alive) reach
	// the tailnet through the join proxy.
	Probe, Keep *http.Client
	// Routes reaches the tailnet in-process, through subnet routes only
	// (-migrate's Connector; routes.go).
	Routes *http.Client
	// KeepDials counts the connections Keep opened.
	KeepDials atomic.Int64
	dev, join *Background
	dir       string
	// officialCRDs are the CRDs of the official release (-migrate).
	officialCRDs []string
	// devinstall is the devinstall binary once built (buildDevinstall).
	devinstall string
}

func (c Config) clusterDir() string { return filepath.Join(c.Work, "cluster") }

// Build builds the official binaries and images and Tailplane's images.
func Build(ctx context.Context, cfg Config, logger *log.Logger) error {
	start := time.Now()
	if err := BuildOfficial(ctx, cfg.Root, filepath.Join(cfg.Work, "bin"), filepath.Join(cfg.Work, "images-official")); err != nil {
		return err
	}
	logger.Info("built the official operator and proxy images", "version", OfficialVersion, "took", time.Since(start).Round(time.Second))
	start = time.Now()
	if err := BuildTailplaneImages(ctx, cfg.Root, filepath.Join(cfg.Work, "images-tailplane")); err != nil {
		return fmt.Errorf("Tailplane's images: %w", err)
	}
	logger.Info("built Tailplane's images", "took", time.Since(start).Round(time.Second))
	return nil
}

// Up starts devcluster's real node with both operators' images, installs
// Tailplane the way `go tool task dev` does (devinstall, with the tailplane
// classes), the official chart with the Helm SDK and its ProxyClass, and
// joins the tailnet for the probes. Stop undoes it.
func Up(ctx context.Context, cfg Config, logger *log.Logger) (*Env, error) {
	return up(ctx, cfg, logger, (*Env).install)
}

// up starts devcluster's real node, runs install, and joins the tailnet.
func up(ctx context.Context, cfg Config, logger *log.Logger, install func(*Env, context.Context, *log.Logger) error) (*Env, error) {
	dir := cfg.clusterDir()
	_ = exec.Command(filepath.Join(cfg.Assets, "devcluster"), "down", "--dir", dir).Run()
	if err := os.RemoveAll(dir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	e := &Env{Cfg: cfg, dir: dir}
	var err error
	args := []string{"up", "--dir", dir, "--node", "real", "--bin", filepath.Join(cfg.Root, "bin"),
		"--import", filepath.Join(cfg.Work, "images-tailplane"),
		"--import", OfficialImageRepo + "=" + filepath.Join(cfg.Work, "images-official")}
	if cfg.Audit {
		policy := filepath.Join(cfg.Work, "audit-policy.yaml")
		if err := os.WriteFile(policy, []byte(AuditPolicy), 0o644); err != nil {
			return nil, err
		}
		args = append(args, "--audit-policy", policy)
	}
	e.dev, err = StartBackground(ctx, filepath.Join(cfg.Work, "devcluster.log"), "ready kubeconfig=", 10*time.Minute,
		filepath.Join(cfg.Assets, "devcluster"), args...)
	if err != nil {
		return nil, fmt.Errorf("devcluster up --node real: %w", err)
	}
	logger.Info("devcluster's real node is up", "dir", dir)
	if e.Tailnet, err = ReadTailnetEnv(filepath.Join(dir, "tailnet.env")); err != nil {
		return e, err
	}
	if e.Cluster, err = NewCluster(filepath.Join(dir, "kubeconfig")); err != nil {
		return e, err
	}
	if err := install(e, ctx, logger); err != nil {
		return e, err
	}
	// Joined and serving the proxy before anything is timed.
	e.join, err = StartBackground(ctx, filepath.Join(cfg.Work, "join.log"), "ready proxy=", 3*time.Minute,
		filepath.Join(cfg.Assets, "devcluster"), "join", "--dir", dir, "--tailscaled", filepath.Join(cfg.Assets, "tailscaled"),
		"--tailscale", filepath.Join(cfg.Assets, "tailscale"), "--proxy", cfg.SocksAddr, "--hostname", "bench-official")
	if err != nil {
		return e, fmt.Errorf("devcluster join: %w", err)
	}
	if e.Probe, err = e.Tailnet.TailnetClient(cfg.SocksAddr, false, nil); err != nil {
		return e, err
	}
	if e.Keep, err = e.Tailnet.TailnetClient(cfg.SocksAddr, true, &e.KeepDials); err != nil {
		return e, err
	}
	return e, nil
}

func (e *Env) install(ctx context.Context, logger *log.Logger) error {
	took, err := e.installTailplane(ctx, TailplaneValues())
	if err != nil {
		return err
	}
	logger.Info("Tailplane installed", "namespace", TailplaneNamespace, "classes", TailplaneClass, "took", took.Round(time.Second))
	chartDir, err := ChartDir(ctx, filepath.Join(e.Cfg.Root, "bench", "official", "tools"))
	if err != nil {
		return err
	}
	start := time.Now()
	helmLog := logger.WithPrefix("helm")
	helmLog.SetLevel(log.WarnLevel)
	if _, err := InstallChart(ctx, filepath.Join(e.dir, "kubeconfig"), chartDir, OfficialNamespace, OfficialRelease,
		OfficialValues(e.Tailnet), 5*time.Minute, helmLog); err != nil {
		return fmt.Errorf("install the official chart: %w (its pods: %s)", err, e.podSummary(ctx, OfficialNamespace))
	}
	if _, err := e.Cluster.Apply(ctx, &unstructured.Unstructured{Object: ProxyClass(e.Tailnet)}); err != nil {
		return err
	}
	logger.Info("official operator installed", "namespace", OfficialNamespace, "chart", chartDir, "took", time.Since(start).Round(time.Second))
	return nil
}

// installTailplane installs Tailplane as `go tool task dev` does (devinstall,
// which adds the folder's values.yaml to its own values) with values, and
// says how long the install took (the build of devinstall left out).
func (e *Env) installTailplane(ctx context.Context, values map[string]any) (time.Duration, error) {
	b, err := yaml.Marshal(values)
	if err != nil {
		return 0, err
	}
	if err := os.WriteFile(filepath.Join(e.dir, "values.yaml"), b, 0o644); err != nil {
		return 0, err
	}
	bin, err := e.buildDevinstall(ctx)
	if err != nil {
		return 0, err
	}
	start := time.Now()
	cmd := exec.CommandContext(ctx, bin, "--dir", e.dir)
	cmd.Dir = e.Cfg.Root
	if out, err := cmd.CombinedOutput(); err != nil {
		return 0, fmt.Errorf("install Tailplane: %w: %s", err, strings.TrimSpace(string(out)))
	}
	return time.Since(start), nil
}

// buildDevinstall builds devinstall once per run and returns its path. It
// is built apart from the install, and timed apart: a `go run` compiles for
// seconds on both cores, which would starve the proxies under measurement.
func (e *Env) buildDevinstall(ctx context.Context) (string, error) {
	if e.devinstall != "" {
		return e.devinstall, nil
	}
	bin := filepath.Join(e.Cfg.Work, "bin", "devinstall")
	if err := goCommand(ctx, e.Cfg.Root, nil, "build", "-o", bin, "./deploy/manifests/devinstall"); err != nil {
		return "", fmt.Errorf("build devinstall: %w", err)
	}
	e.devinstall = bin
	return bin, nil
}

// podSummary names each pod of ns with its phase, for error messages.
func (e *Env) podSummary(ctx context.Context, ns string) string {
	pods, err := e.Cluster.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err.Error()
	}
	var parts []string
	for _, p := range pods.Items {
		s := p.Name + " " + string(p.Status.Phase)
		if p.DeletionTimestamp != nil {
			s += fmt.Sprintf(" (terminating for %s)", time.Since(p.DeletionTimestamp.Time).Round(time.Second))
		}
		for _, cs := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
			if w := cs.State.Waiting; w != nil {
				s += " " + cs.Name + ":" + w.Reason
			}
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}

// Stop leaves the tailnet and stops devcluster (its folder stays in Work).
func (e *Env) Stop(logger *log.Logger) {
	if e == nil {
		return
	}
	if err := e.join.Stop(); err != nil {
		logger.Warn("devcluster join", "err", err)
	}
	if err := e.dev.Stop(); err != nil {
		logger.Warn("devcluster up", "err", err)
	}
	if out, err := exec.Command(filepath.Join(e.Cfg.Assets, "devcluster"), "down", "--dir", e.dir).CombinedOutput(); err != nil {
		logger.Warn("devcluster down", "err", err, "output", string(out))
	}
}
