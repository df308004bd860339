package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"sigs.k8s.io/kind/pkg/apis/config/v1alpha4"
	"sigs.k8s.io/yaml"
)

// recorder keeps what the fakes were asked, in order.
type recorder struct{ calls []string }

func (r *recorder) add(format string, args ...any) {
	r.calls = append(r.calls, fmt.Sprintf(format, args...))
}

// fakeHost is Host without Docker: a Docker Engine on Linux whose kind
// network's gateway is 172.18.0.1, an address of this machine.
type fakeHost struct {
	*recorder
	infoErr   error
	machine   string
	gateway   netip.Addr
	addrs     []netip.Addr
	failRun   string // a Run whose command line contains this fails
	commands  []Command
	startArgs []Command
}

func newFakeHost(r *recorder) *fakeHost {
	gw := netip.MustParseAddr("172.18.0.1")
	return &fakeHost{recorder: r, machine: "x86_64", gateway: gw,
		addrs: []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("192.168.1.20"), gw}}
}

func (h *fakeHost) DockerInfo(context.Context) (string, string, error) {
	h.add("docker info")
	if h.infoErr != nil {
		return "", "", h.infoErr
	}
	return "28.2.2", h.machine, nil
}

func (h *fakeHost) NetworkGateway(_ context.Context, network string) (netip.Addr, error) {
	h.add("docker network inspect %s", network)
	return h.gateway, nil
}

func (h *fakeHost) Addrs() ([]netip.Addr, error) { return h.addrs, nil }

func (h *fakeHost) Run(_ context.Context, c Command) error {
	h.add("run %s", c)
	h.commands = append(h.commands, c)
	if h.failRun != "" && strings.Contains(c.String(), h.failRun) {
		return errors.New("exit status 1")
	}
	// The echo build leaves its binary where -o says.
	if len(c.Args) > 2 && c.Args[1] == "build" {
		for i, a := range c.Args {
			if a == "-o" {
				return os.WriteFile(filepath.Join(c.Args[i+1], "devcluster-echo"), []byte("\x7fELF echo"), 0o755)
			}
		}
	}
	return nil
}

func (h *fakeHost) Start(_ context.Context, c Command, ready string) (func() error, error) {
	h.add("start %s (until %q; log %s)", c, ready, c.Log)
	h.startArgs = append(h.startArgs, c)
	return func() error { h.add("stop %s", c.Args[1]); return nil }, nil
}

// fakeKind is Kind without Docker.
type fakeKind struct {
	*recorder
	exists    bool
	created   *v1alpha4.Cluster
	archives  map[string][]byte
	createErr error
}

func (k *fakeKind) Exists(name string) (bool, error) {
	k.add("kind get clusters (%s?)", name)
	return k.exists, nil
}

func (k *fakeKind) Create(name string, cfg *v1alpha4.Cluster, kubeconfig string) error {
	k.add("kind create cluster --name %s --kubeconfig %s", name, kubeconfig)
	k.created = cfg
	return k.createErr
}

func (k *fakeKind) LoadImageArchive(name, archive string) error {
	k.add("kind load image-archive --name %s %s", name, archive)
	b, err := os.ReadFile(archive)
	if k.archives == nil {
		k.archives = map[string][]byte{}
	}
	k.archives[filepath.Base(archive)] = b
	return err
}

func (k *fakeKind) ReadNodeFile(name, path string) ([]byte, error) {
	k.add("cat %s on %s-control-plane", path, name)
	return []byte("PEM of " + path), nil
}

func (k *fakeKind) Delete(name, kubeconfig string) error {
	k.add("kind delete cluster --name %s --kubeconfig %s", name, kubeconfig)
	return nil
}

// testOptions lays out a repository whose .cache/images holds the layouts
// `go tool task images PLATFORMS=linux/amd64 TAG=kind-e2e` writes.
func testOptions(t *testing.T) (Options, *bytes.Buffer) {
	t.Helper()
	root := t.TempDir()
	for _, name := range []string{"tailplane-operator", "tailplane-proxy"} {
		writeTestLayout(t, filepath.Join(root, ".cache", "images", name), "kind-e2e", "amd64")
	}
	var out bytes.Buffer
	return Options{Root: root, Assets: filepath.Join(root, ".cache", "assets"), Name: "tailplane-e2e", Tag: "kind-e2e",
		Dir: filepath.Join(root, ".cache", "kind-e2e"), Network: "kind", SuiteArgs: []string{"-ginkgo.v"}, Out: &out}, &out
}

func TestRunSteps(t *testing.T) {
	o, out := testOptions(t)
	r := &recorder{}
	h, k := newFakeHost(r), &fakeKind{recorder: r}
	if err := Run(context.Background(), o, h, k); err != nil {
		t.Fatal(err)
	}
	root, d := o.Root, o.Dir
	want := []string{
		"docker info",
		"kind get clusters (tailplane-e2e?)",
		"run (cd " + root + ") go tool task images PLATFORMS=linux/amd64 TAG=kind-e2e",
		"run (cd " + root + ") CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go build -C kind-e2e -o " + d + "/images/ ./cmd/devcluster-echo",
		"kind create cluster --name tailplane-e2e --kubeconfig " + d + "/kubeconfig",
		"docker network inspect kind",
		"cat /etc/kubernetes/pki/ca.crt on tailplane-e2e-control-plane",
		"cat /etc/kubernetes/pki/ca.key on tailplane-e2e-control-plane",
		"start (cd " + root + ") " + o.Assets + "/devcluster tailnet --dir " + d + " --host 172.18.0.1 --acme-issuer-cert " + d + "/pki/cluster-ca.crt --acme-issuer-key " + d + "/pki/cluster-ca.key (until \"ready \"; log " + d + "/tailnet.log)",
		"kind load image-archive --name tailplane-e2e " + d + "/images/tailplane-operator.tar",
		"kind load image-archive --name tailplane-e2e " + d + "/images/tailplane-proxy.tar",
		"kind load image-archive --name tailplane-e2e " + d + "/images/echo.tar",
		"run (cd " + root + ") go run ./deploy/manifests/devinstall --dir " + d,
		"run (cd " + root + ") TAILPLANE_E2E_DIR=" + d + " TAILPLANE_TEST_ASSETS=" + o.Assets + " go test -C kind-e2e -count=1 -timeout=60m ./operator -ginkgo.v",
		"stop tailnet",
		"kind delete cluster --name tailplane-e2e --kubeconfig " + d + "/kubeconfig",
	}
	if !reflect.DeepEqual(r.calls, want) {
		t.Errorf("steps:\n  %s\nwant:\n  %s", strings.Join(r.calls, "\n  "), strings.Join(want, "\n  "))
	}
	if !reflect.DeepEqual(k.created, ClusterConfig("tailplane-e2e")) {
		t.Errorf("created %+v, want ClusterConfig", k.created)
	}

	// The archives kind loaded name the images as the chart and the
	// testdata refer to them.
	for file, names := range map[string][]string{
		"tailplane-operator.tar": {OperatorRepo + ":kind-e2e"},
		"tailplane-proxy.tar":    {ProxyRepo + ":kind-e2e"},
		"echo.tar":               EchoRefs,
	} {
		if got := archiveImageNames(t, k.archives[file]); !reflect.DeepEqual(got, names) {
			t.Errorf("%s names %v, want %v", file, got, names)
		}
	}

	// devinstall reads the loaded tags from D/values.yaml.
	b, err := os.ReadFile(filepath.Join(d, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var values map[string]any
	if err := yaml.Unmarshal(b, &values); err != nil {
		t.Fatal(err)
	}
	wantValues := map[string]any{
		"operatorConfig": map[string]any{"image": map[string]any{"repository": OperatorRepo, "tag": "kind-e2e", "pullPolicy": "IfNotPresent"}},
		"proxyConfig":    map[string]any{"image": map[string]any{"repository": ProxyRepo, "tag": "kind-e2e"}},
	}
	if !reflect.DeepEqual(values, wantValues) {
		t.Errorf("values.yaml:\n%s", b)
	}
	for file, want := range map[string]string{"cluster-ca.crt": "PEM of /etc/kubernetes/pki/ca.crt", "cluster-ca.key": "PEM of /etc/kubernetes/pki/ca.key"} {
		b, err := os.ReadFile(filepath.Join(d, "pki", file))
		if err != nil || string(b) != want {
			t.Errorf("%s: %q %v", file, b, err)
		}
	}
	if !strings.Contains(out.String(), "the operator suite passed on kind") {
		t.Errorf("output:\n%s", out)
	}
}

func TestRunArm64(t *testing.T) {
	o, _ := testOptions(t)
	for _, name := range []string{"tailplane-operator", "tailplane-proxy"} {
		writeTestLayout(t, filepath.Join(o.Root, ".cache", "images", name), "kind-e2e", "arm64")
	}
	r := &recorder{}
	h, k := newFakeHost(r), &fakeKind{recorder: r}
	h.machine = "aarch64"
	if err := Run(context.Background(), o, h, k); err != nil {
		t.Fatal(err)
	}
	if got := h.commands[0].String(); !strings.HasSuffix(got, "go tool task images PLATFORMS=linux/arm64 TAG=kind-e2e") {
		t.Errorf("images built with %q", got)
	}
	if got := strings.Join(h.commands[1].Env, " "); got != "CGO_ENABLED=0 GOOS=linux GOARCH=arm64" {
		t.Errorf("echo built with %q", got)
	}
}

func TestRunBuildsImagesWithTheRunningTask(t *testing.T) {
	o, _ := testOptions(t)
	o.Task = []string{"/cache/task"}
	r := &recorder{}
	h, k := newFakeHost(r), &fakeKind{recorder: r}
	if err := Run(context.Background(), o, h, k); err != nil {
		t.Fatal(err)
	}
	if got, want := h.commands[0].String(), "/cache/task images PLATFORMS=linux/amd64 TAG=kind-e2e"; !strings.HasSuffix(got, want) {
		t.Errorf("images built with %q, want %q", got, want)
	}
}

func TestRunWithoutDocker(t *testing.T) {
	o, _ := testOptions(t)
	r := &recorder{}
	h, k := newFakeHost(r), &fakeKind{recorder: r}
	h.infoErr = errors.New("`docker info` failed: Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?")
	err := Run(context.Background(), o, h, k)
	if err == nil || !strings.HasPrefix(err.Error(), "e2e:kind needs a Docker engine: `docker info` failed: Cannot connect") {
		t.Fatalf("err = %v", err)
	}
	if !reflect.DeepEqual(r.calls, []string{"docker info"}) {
		t.Errorf("did more than ask Docker: %v", r.calls)
	}
}

func TestRunRefusesAnExistingCluster(t *testing.T) {
	o, _ := testOptions(t)
	r := &recorder{}
	h, k := newFakeHost(r), &fakeKind{recorder: r, exists: true}
	err := Run(context.Background(), o, h, k)
	if err == nil || !strings.Contains(err.Error(), "go tool task e2e:kind:down") {
		t.Fatalf("err = %v", err)
	}
	if len(r.calls) != 2 {
		t.Errorf("went on: %v", r.calls)
	}
}

func TestRunRefusesALeftoverTailnet(t *testing.T) {
	o, _ := testOptions(t)
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(o.Dir, "devcluster.pid"), []byte("12345"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := &recorder{}
	err := Run(context.Background(), o, newFakeHost(r), &fakeKind{recorder: r})
	if err == nil || !strings.Contains(err.Error(), "go tool task e2e:kind:down stops it") {
		t.Fatalf("err = %v", err)
	}
}

// A failing suite still stops the tailnet and deletes the cluster.
func TestRunCleansUpAfterAFailure(t *testing.T) {
	o, _ := testOptions(t)
	r := &recorder{}
	h, k := newFakeHost(r), &fakeKind{recorder: r}
	h.failRun = "./operator"
	err := Run(context.Background(), o, h, k)
	if err == nil || !strings.Contains(err.Error(), "the operator suite on kind: exit status 1") {
		t.Fatalf("err = %v", err)
	}
	n := len(r.calls)
	if n < 2 || r.calls[n-2] != "stop tailnet" || !strings.HasPrefix(r.calls[n-1], "kind delete cluster --name tailplane-e2e") {
		t.Errorf("last steps %v", r.calls)
	}
}

func TestRunKeep(t *testing.T) {
	o, out := testOptions(t)
	o.Keep = true
	r := &recorder{}
	h, k := newFakeHost(r), &fakeKind{recorder: r}
	if err := Run(context.Background(), o, h, k); err != nil {
		t.Fatal(err)
	}
	if last := r.calls[len(r.calls)-1]; last != "stop tailnet" {
		t.Errorf("last step %q, want the tailnet stopped and the cluster kept", last)
	}
	if !strings.Contains(out.String(), "KEEP=1: kind cluster \"tailplane-e2e\" is still running") {
		t.Errorf("output:\n%s", out)
	}
}

// Docker Desktop: the kind network's gateway is in the VM, not here.
func TestRunNeedsTheGatewayHere(t *testing.T) {
	o, _ := testOptions(t)
	r := &recorder{}
	h, k := newFakeHost(r), &fakeKind{recorder: r}
	h.addrs = []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("192.168.1.20")}
	err := Run(context.Background(), o, h, k)
	if err == nil || !strings.Contains(err.Error(), "gateway 172.18.0.1 is not an address of this machine") {
		t.Fatalf("err = %v", err)
	}
	if last := r.calls[len(r.calls)-1]; !strings.HasPrefix(last, "kind delete cluster") {
		t.Errorf("cluster left behind: %v", r.calls)
	}
	for _, c := range r.calls {
		if strings.HasPrefix(c, "start") {
			t.Errorf("started the tailnet anyway: %s", c)
		}
	}
}

// A layout of the wrong platform fails before a cluster is created.
func TestRunWrongPlatformLayout(t *testing.T) {
	o, _ := testOptions(t)
	writeTestLayout(t, filepath.Join(o.Root, ".cache", "images", "tailplane-proxy"), "kind-e2e", "arm64")
	r := &recorder{}
	h, k := newFakeHost(r), &fakeKind{recorder: r}
	err := Run(context.Background(), o, h, k)
	if err == nil || !strings.Contains(err.Error(), "not linux/amd64") {
		t.Fatalf("err = %v", err)
	}
	if k.created != nil {
		t.Error("created a cluster anyway")
	}
}

func TestRunUnsupportedArch(t *testing.T) {
	o, _ := testOptions(t)
	r := &recorder{}
	h, k := newFakeHost(r), &fakeKind{recorder: r}
	h.machine = "s390x"
	if err := Run(context.Background(), o, h, k); err == nil || !strings.Contains(err.Error(), "amd64 and arm64") {
		t.Fatalf("err = %v", err)
	}
}

func TestDown(t *testing.T) {
	o, _ := testOptions(t)
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	r := &recorder{}
	h, k := newFakeHost(r), &fakeKind{recorder: r, exists: true}
	if err := Down(context.Background(), o, h, k); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"docker info",
		"kind get clusters (tailplane-e2e?)",
		"kind delete cluster --name tailplane-e2e --kubeconfig " + o.Dir + "/kubeconfig",
		"run (cd " + o.Root + ") " + o.Assets + "/devcluster down --dir " + o.Dir,
	}
	if !reflect.DeepEqual(r.calls, want) {
		t.Errorf("steps:\n  %s\nwant:\n  %s", strings.Join(r.calls, "\n  "), strings.Join(want, "\n  "))
	}
	if _, err := os.Stat(o.Dir); !os.IsNotExist(err) {
		t.Errorf("folder left: %v", err)
	}
}

func TestParseArgs(t *testing.T) {
	t.Setenv("KIND_EXPERIMENTAL_DOCKER_NETWORK", "")
	o, down, err := parseArgs([]string{"-root", "/repo", "-keep", "--", "-ginkgo.focus=Helm"})
	if err != nil {
		t.Fatal(err)
	}
	if down || !o.Keep || o.Name != "tailplane-e2e" || o.Tag != "kind-e2e" || o.Network != "kind" ||
		o.Assets != "/repo/.cache/assets" || o.Dir != "/repo/.cache/kind-e2e" || !reflect.DeepEqual(o.SuiteArgs, []string{"-ginkgo.focus=Helm"}) {
		t.Errorf("options %+v down=%v", o, down)
	}
	t.Setenv("KIND_EXPERIMENTAL_DOCKER_NETWORK", "ci-net")
	if o, _, _ := parseArgs(nil); o.Network != "ci-net" {
		t.Errorf("network %q", o.Network)
	}
}
