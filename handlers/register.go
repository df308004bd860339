package handlers

import (
	"github.com/tailplane/tailplane/handlers/connector"
	"github.com/tailplane/tailplane/handlers/dnsconfig"
	"github.com/tailplane/tailplane/handlers/egress"
	"github.com/tailplane/tailplane/handlers/gateway"
	"github.com/tailplane/tailplane/handlers/gatewayclass"
	"github.com/tailplane/tailplane/handlers/ingress"
	"github.com/tailplane/tailplane/handlers/ingressclass"
	"github.com/tailplane/tailplane/handlers/lib/cluster"
	"github.com/tailplane/tailplane/handlers/lib/groupmember"
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
// pipeline. The kinds of members of a ProxyGroup register with their own
// modules and join members, which the group's module asks for them: it
// knows no member kind.
func Register(op *runtime.Operator, d *cluster.Deps) {
	p := pipeline.New(d)
	members := &groupmember.Registry{}
	d.IndexParents()
	service.Register(op, d, p)
	egress.Register(op, d, p)
	ingress.Register(op, d, p)
	connector.Register(op, d, p)
	proxygroup.Register(op, d, p, members)
	ingress.RegisterMember(op, d, p, members)
	service.RegisterMember(op, d, p, members)
	egress.RegisterMember(op, d, p, members)
	ingressclass.Register(op, d)
	gatewayAPI := gatewayclass.Served(d)
	gatewayclass.Register(op, d, gatewayAPI)
	gateway.Register(op, d, p, members, gatewayAPI)
	proxyclass.Register(op, d)
	plugin.Register(op, d, p)
	proxygrouppolicy.Register(op, d)
	unsupported.Register(op, d)
	dnsconfig.Register(op, d)
	tailnet.Register(op, d)
}

// RegisterHandBack registers, instead of the handler modules, the hand-back
// of every proxy to the official operator (settings.Settings.HandBack):
// it runs when op starts, and nothing is handled.
func RegisterHandBack(op *runtime.Operator, d *cluster.Deps) {
	pipeline.RegisterHandBack(op, d)
}
