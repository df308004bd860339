package tailnet

import (
	"context"
	"errors"
	"strings"

	tsapi "tailscale.com/client/tailscale/v2"
)

// Service is a Tailscale Service (a "VIP service"): a tailnet name and
// addresses of its own that control routes to one of the devices
// advertising it.
type Service struct {
	// Name is "svc:<dns label>"; the MagicDNS name is the label under the
	// tailnet's domain.
	Name string
	// Addrs are the service's tailnet addresses (an IPv4 and an IPv6),
	// chosen by control at creation and kept on updates.
	Addrs []string
	// Comment is shown in the admin console.
	Comment string
	// Annotations are free-form; the operator records its ownership in
	// them (AnnotationOwnerReferences).
	Annotations map[string]string
	// Ports are the ports hosts must serve: "tcp:443", "udp:53", or
	// "do-not-validate".
	Ports []string
	// Tags are the service's ACL tags.
	Tags []string
}

// GetService returns the Tailscale Service name, or nil (and no error) when
// there is none.
func (t *Tailscale) GetService(ctx context.Context, name string) (*Service, error) {
	s, err := t.client.Services().Get(ctx, name)
	if tsapi.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, apiError("get Tailscale Service "+name, err)
	}
	out := fromAPIService(*s)
	return &out, nil
}

// PutService creates the Tailscale Service s.Name or replaces its fields;
// empty Addrs keep (or, at creation, let control choose) its addresses.
func (t *Tailscale) PutService(ctx context.Context, s Service) error {
	if !strings.HasPrefix(s.Name, "svc:") {
		return errors.New(`tailnet: put Tailscale Service: name must start with "svc:"`)
	}
	err := t.client.Services().CreateOrUpdate(ctx, tsapi.Service{Name: s.Name, Addrs: s.Addrs, Comment: s.Comment,
		Annotations: s.Annotations, Ports: s.Ports, Tags: s.Tags})
	if err != nil {
		return apiError("put Tailscale Service "+s.Name, err)
	}
	return nil
}

// DeleteService deletes a Tailscale Service; one that does not exist is not
// an error.
func (t *Tailscale) DeleteService(ctx context.Context, name string) error {
	err := t.client.Services().Delete(ctx, name)
	if err != nil && !tsapi.IsNotFound(err) {
		return apiError("delete Tailscale Service "+name, err)
	}
	return nil
}

// ListServices lists the tailnet's Tailscale Services.
func (t *Tailscale) ListServices(ctx context.Context) ([]Service, error) {
	list, err := t.client.Services().List(ctx)
	if err != nil {
		return nil, apiError("list Tailscale Services", err)
	}
	out := make([]Service, 0, len(list))
	for _, s := range list {
		out = append(out, fromAPIService(s))
	}
	return out, nil
}

func fromAPIService(s tsapi.Service) Service {
	return Service{Name: s.Name, Addrs: s.Addrs, Comment: s.Comment, Annotations: s.Annotations, Ports: s.Ports, Tags: s.Tags}
}
