package cluster

import (
	"context"
	"fmt"
	"net"
	"strings"
	"time"
)

// Resolver looks up host names (net.DefaultResolver, or a test double).
type Resolver interface {
	LookupHost(ctx context.Context, host string) ([]string, error)
}

// DefaultResolveRetry is the default of Deps.ResolveRetry.
const DefaultResolveRetry = 15 * time.Second

// resolveTimeout bounds one lookup.
const resolveTimeout = 5 * time.Second

// CheckResolves reports, as a readable error, that name (an ExternalName a
// proxy forwards to) does not resolve from the operator's Pod, which uses
// the cluster DNS like the proxies do.
func (d *Deps) CheckResolves(ctx context.Context, name string) error {
	r := d.Resolver
	if r == nil {
		r = net.DefaultResolver
	}
	ctx, cancel := context.WithTimeout(ctx, resolveTimeout)
	defer cancel()
	host := strings.TrimSuffix(name, ".")
	addrs, err := r.LookupHost(ctx, host)
	if err == nil && len(addrs) == 0 {
		err = fmt.Errorf("no addresses")
	}
	if err != nil {
		return fmt.Errorf("spec.externalName %q does not resolve (%v): clients of the proxy get their connections reset until it does", host, err)
	}
	return nil
}
