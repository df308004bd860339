package smoke

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"golang.org/x/net/proxy"
)

// joinSpecs: `devcluster join` puts a real tailscaled (userspace) and the
// tailscale CLI, built from the pinned tailscale.com, on the tailnet, and
// proxies other programs into it.
func joinSpecs() {
	It("joins with a userspace tailscaled and the tailscale CLI and proxies into the tailnet until Ctrl-C", func(ctx SpecContext) {
		assets := os.Getenv("TAILPLANE_TEST_ASSETS")
		tailscaled, tailscale := filepath.Join(assets, "tailscaled"), filepath.Join(assets, "tailscale")
		for _, bin := range []string{tailscaled, tailscale} {
			_, err := os.Stat(bin)
			Expect(err).NotTo(HaveOccurred(), "go tool task test:assets builds %s", bin)
		}

		By("a tailnet node serving HTTP")
		target := newNode("join-target", mintKey(ctx, apiClient(), true))
		_, err := target.Up(ctx)
		Expect(err).NotTo(HaveOccurred())
		ln, err := target.Listen("tcp", ":80")
		Expect(err).NotTo(HaveOccurred())
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.WriteString(w, "reached through devcluster join")
		})}
		go func() { _ = srv.Serve(ln) }()
		DeferCleanup(srv.Close)

		By("devcluster join")
		free, err := net.Listen("tcp", "127.0.0.1:0")
		Expect(err).NotTo(HaveOccurred())
		proxyAddr := free.Addr().String()
		Expect(free.Close()).To(Succeed())
		join := exec.Command(suiteCluster.bin, "join", "--dir", suiteCluster.dir, "--tailscaled", tailscaled, "--tailscale", tailscale, "--proxy", proxyAddr)
		out, err := join.StdoutPipe()
		Expect(err).NotTo(HaveOccurred())
		join.Stderr = GinkgoWriter
		Expect(join.Start()).To(Succeed())
		exited := make(chan error, 1)
		go func() { exited <- join.Wait() }()
		DeferCleanup(func() {
			_ = join.Process.Kill()
		})
		ready := make(chan string, 1)
		go func() {
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				fmt.Fprintln(GinkgoWriter, sc.Text())
				if strings.HasPrefix(sc.Text(), "ready ") {
					ready <- sc.Text()
				}
			}
		}()
		Eventually(ready).WithTimeout(2 * time.Minute).Should(Receive(ContainSubstring(proxyAddr)))

		By("the tailscale CLI sees the node running")
		socket := filepath.Join(suiteCluster.dir, "join", "tailscaled.sock")
		var status struct {
			BackendState string
			Self         struct{ HostName string }
		}
		statusJSON, err := exec.CommandContext(ctx, tailscale, "--socket="+socket, "status", "--json").Output()
		Expect(err).NotTo(HaveOccurred())
		Expect(json.Unmarshal(statusJSON, &status)).To(Succeed())
		Expect(status.BackendState).To(Equal("Running"))
		Expect(status.Self.HostName).To(Equal("devcluster-join"))

		By("a program reaching a tailnet name through the SOCKS5 proxy")
		dialer, err := proxy.SOCKS5("tcp", proxyAddr, nil, proxy.Direct)
		Expect(err).NotTo(HaveOccurred())
		hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
			DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				return dialer.(proxy.ContextDialer).DialContext(ctx, network, addr)
			}}}
		Eventually(func(g Gomega) {
			resp, err := hc.Get("http://join-target." + suiteCluster.env["TS_MAGICDNS_DOMAIN"] + "/")
			g.Expect(err).NotTo(HaveOccurred())
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			g.Expect(string(body)).To(Equal("reached through devcluster join"))
		}).WithTimeout(60 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())

		By("Ctrl-C leaves cleanly")
		Expect(join.Process.Signal(syscall.SIGINT)).To(Succeed())
		Eventually(exited).WithTimeout(30 * time.Second).Should(Receive(BeNil()))
	}, SpecTimeout(4*time.Minute))
}
