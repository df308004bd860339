package handlers

import (
	"github.com/tailplane/tailplane/handlers/kit"
	"github.com/tailplane/tailplane/handlers/service"
	"github.com/tailplane/tailplane/runtime"
)

// Register adds every handler module to op, sharing d.
func Register(op *runtime.Operator, d *kit.Deps) {
	d.WatchProxyState()
	service.Register(op, d)
}
