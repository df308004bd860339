package handlers

import (
	"github.com/tailplane/tailplane/handlers/connector"
	"github.com/tailplane/tailplane/handlers/dnsconfig"
	"github.com/tailplane/tailplane/handlers/egress"
	"github.com/tailplane/tailplane/handlers/ingress"
	"github.com/tailplane/tailplane/handlers/ingressclass"
	"github.com/tailplane/tailplane/handlers/lib/cluster"
	"github.com/tailplane/tailplane/handlers/lib/pipeline"
	"github.com/tailplane/tailplane/handlers/plugin"
	"github.com/tailplane/tailplane/handlers/proxyclass"
	"github.com/tailplane/tailplane/handlers/proxygroup"
	"github.com/tailplane/tailplane/handlers/proxygrouppolicy"
	"github.com/tailplane/tailplane/handlers/service"
	"github.com/tailplane/tailplane/handlers/tailnet"
	"github.com/tailplane/tailplane/handlers/unsupported"
	"github.com/tailplane/tailplane/runtime"
)

// Register adds every handler module to op, sharing d and one proxy
// pipeline.
func Register(op *runtime.Operator, d *cluster.Deps) {
	p := pipeline.New(d)
	d.IndexParents()
	service.Register(op, d, p)
	egress.Register(op, d, p)
	ingress.Register(op, d, p)
	connector.Register(op, d, p)
	proxygroup.Register(op, d, p)
	ingressclass.Register(op, d)
	proxyclass.Register(op, d)
	plugin.Register(op, d, p)
	proxygrouppolicy.Register(op, d)
	unsupported.Register(op, d)
	dnsconfig.Register(op, d)
	tailnet.Register(op, d)
}
