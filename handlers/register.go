package handlers

import (
	"github.com/tailplane/tailplane/handlers/egress"
	"github.com/tailplane/tailplane/handlers/ingress"
	"github.com/tailplane/tailplane/handlers/ingressclass"
	"github.com/tailplane/tailplane/handlers/kit"
	"github.com/tailplane/tailplane/handlers/plugin"
	"github.com/tailplane/tailplane/handlers/proxyclassready"
	"github.com/tailplane/tailplane/handlers/service"
	"github.com/tailplane/tailplane/runtime"
)

// Register adds every handler module to op, sharing d.
func Register(op *runtime.Operator, d *kit.Deps) {
	d.WatchProxyState()
	d.IndexParents()
	service.Register(op, d)
	egress.Register(op, d)
	ingress.Register(op, d)
	ingressclass.Register(op, d)
	proxyclassready.Register(op, d)
	plugin.Register(op, d)
}
