// Command coredns is CoreDNS (github.com/coredns/coredns) with the plugins of
// a Kubernetes cluster's DNS only, so that it builds in a fraction of the
// full CoreDNS's time: the real node's cluster DNS, as CoreDNS is kind's.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/hosts"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"
)

// directives are the plugins in the order CoreDNS runs them (its
// plugin.cfg order, restricted to the ones imported above).
var directives = []string{"reload", "health", "ready", "errors", "log", "loadbalance", "cache", "hosts", "kubernetes", "loop", "forward"}

func main() {
	dnsserver.Directives = directives
	coremain.Run()
}
