package main

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// tryText is what devinstall prints once the operator is installed: steps
// that work on the cluster folder dir's control server (tailnet.env's
// TS_CONTROL: devcluster's own, or Headscale, which issues no certificates
// and has no Tailscale Services) and that name dir wherever a command
// needs it (go tool task's DEV_DIR, when dir is not its default).
func tryText(dir string) string {
	abs, _ := filepath.Abs(dir)
	env, _ := readEnv(filepath.Join(abs, "tailnet.env"))
	domain := cmp.Or(env["TS_MAGICDNS_DOMAIN"], "devcluster.ts.net")
	kubectl := "go tool task dev:kubectl" + devDirArg(abs) + " --"
	join := "go tool task dev:join" + devDirArg(abs)
	if env["TS_CONTROL"] == "headscale" {
		return headscaleTry(abs, domain, kubectl, env["HEADSCALE_CONFIG"])
	}
	return fmt.Sprintf(`
Tailplane's operator is installed in devcluster (Helm release tailscale-operator,
namespace tailscale; running "go tool task dev" again upgrades it, adding chart
values from %[1]s/values.yaml), every device on devcluster's ACME directory
(chart value proxyConfig.acmeDirectoryURL), and the default ProxyClass %[2]q. Try:
  %[4]s -n tailscale get pods,statefulsets,proxyclass
  # echo backends, then the seed's exposed Service and Ingress:
  %[4]s apply -f kind-e2e/operator/testdata/echo.yaml \
      -f examples/seed/01-service-expose.yaml -f examples/seed/03-ingress.yaml
  %[4]s get svc postgres -o jsonpath='{.status.conditions}'
  %[4]s get ingress my-app        # ADDRESS: my-app.%[5]s
  # reach them through the tailnet (a tsnet client with Pebble's root):
  $(go tool task test:assets-dir)/devcluster curl --dir %[1]s https://my-app.%[5]s/
  $(go tool task test:assets-dir)/devcluster curl --dir %[1]s http://default-postgres.%[5]s:5432/
  # the seed's ProxyGroup: members are Tailscale Services served by both replicas
  %[4]s apply -f examples/seed/07-proxygroup.yaml
  # kubectl through the tailnet: a kube-apiserver ProxyGroup (noauth: your own
  # credentials), a client on the tailnet (%[6]s, SOCKS5 on
  # 127.0.0.1:1055) and a kubeconfig cluster for it:
  %[4]s apply -f examples/proxygroup-kube-apiserver.yaml
  kubectl config set-cluster tailnet --server=https://k8s-api.%[5]s \
      --certificate-authority=%[1]s/ca.pem --proxy-url=socks5://127.0.0.1:1055
  # or the operator's own device: apiServerProxyConfig: {mode: "noauth"} in
  # %[1]s/values.yaml, "go run ./deploy/manifests/devinstall --dir %[1]s",
  # then --server=https://tailscale-operator.%[5]s
%[3]sCtrl-C stops the cluster.
`, abs, ProxyClassName, pluginTry(abs), kubectl, domain, join)
}

// headscaleTry is tryText on Headscale: no ts.net certificates (the seed's
// Ingress is served as plain HTTP with the http-endpoint annotation) and no
// Tailscale Services (so no ingress or kube-apiserver ProxyGroup).
func headscaleTry(abs, domain, kubectl, config string) string {
	cli := "$(go tool task test:assets-dir)/headscale -c " + cmp.Or(config, abs+"/headscale/config.yaml")
	return fmt.Sprintf(`
Tailplane's operator is installed in devcluster on Headscale (Helm release
tailscale-operator, namespace tailscale, with headscale.url and headscale.apiKey;
running "go tool task dev" again upgrades it). Headscale issues no HTTPS
certificates and has no Tailscale Services: Ingresses serve your own certificate
or plain HTTP, and ProxyGroups of type ingress or kube-apiserver are refused
(docs/headscale.md). Try:
  %[2]s -n tailscale get pods,statefulsets
  # echo backends, then the seed's exposed Service:
  %[2]s apply -f kind-e2e/operator/testdata/echo.yaml -f examples/seed/01-service-expose.yaml
  %[2]s get svc postgres -o jsonpath='{.status.conditions}'
  # the seed's Ingress, served as plain HTTP on port 80 (without the annotation
  # it is refused: Headscale has no certificate for its name):
  %[2]s apply -f examples/seed/03-ingress.yaml
  %[2]s annotate ingress my-app tailscale.com/http-endpoint=enabled
  %[2]s get ingress my-app        # ADDRESS: my-app.%[3]s, port 80
  # reach them through the tailnet (a tsnet client on Headscale):
  $(go tool task test:assets-dir)/devcluster curl --dir %[1]s http://my-app.%[3]s/
  $(go tool task test:assets-dir)/devcluster curl --dir %[1]s http://default-postgres.%[3]s:5432/
  # the proxies' nodes in Headscale:
  %[4]s nodes list
%[5]sCtrl-C stops the cluster.
`, abs, kubectl, domain, cli, pluginTry(abs))
}

// devDirArg is " DEV_DIR=<abs>" for go tool task commands when abs is not
// the folder they use by default (.devcluster in the working directory,
// which go tool task makes the repository root), else "".
func devDirArg(abs string) string {
	if wd, err := os.Getwd(); err == nil && abs == filepath.Join(wd, ".devcluster") {
		return ""
	}
	if strings.ContainsAny(abs, " '\"$\\") {
		return " DEV_DIR='" + strings.ReplaceAll(abs, "'", `'\''`) + "'"
	}
	return " DEV_DIR=" + abs
}

// pluginTry is the try-steps of a routing plugin through devcluster's OCI
// registry (its address is in the cluster folder's registry.env), "" when
// the cluster has no registry.
func pluginTry(dir string) string {
	b, _ := os.ReadFile(filepath.Join(dir, "registry.env"))
	reg, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "REGISTRY=")
	if !ok || reg == "" {
		return ""
	}
	return fmt.Sprintf(`  # a routing plugin from devcluster's OCI registry %[1]s (docs/plugins.md):
  go tool task plugin:build DIR=plugins/examples/canary
  go tool task plugin:push DIR=plugins/examples/canary REF=%[1]s/canary:v1
  # then a RoutingPlugin with spec.module.oci.ref: %[1]s/canary:v1 and the printed sha256
`, reg)
}
