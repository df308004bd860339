package tailnet

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	tsapi "tailscale.com/client/tailscale/v2"
	"tailscale.com/net/tsaddr"
)

// serviceAddrs parses a service's addresses, failing unless they are one
// IPv4 in VIPRange and its 4-to-6 IPv6.
func serviceAddrs(t *testing.T, svc *tsapi.Service) (v4, v6 netip.Addr) {
	t.Helper()
	if len(svc.Addrs) != 2 {
		t.Fatalf("%s has addrs %v, want one IPv4 and one IPv6", svc.Name, svc.Addrs)
	}
	v4, err4 := netip.ParseAddr(svc.Addrs[0])
	v6, err6 := netip.ParseAddr(svc.Addrs[1])
	if err4 != nil || err6 != nil || !v4.Is4() || !VIPRange().Contains(v4) || v6 != tsaddr.Tailscale4To6(v4) {
		t.Fatalf("%s has addrs %v, want an IPv4 in %s and its 4-to-6 IPv6", svc.Name, svc.Addrs, VIPRange())
	}
	return v4, v6
}

// The Tailscale Services API with the official client: create (addresses
// allocated), get, update (addresses kept), list, delete (then 404).
func TestServicesAPI(t *testing.T) {
	tn := startForTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	api := client0(t, tn).VIPServices()

	web := tsapi.Service{Name: "svc:web", Comment: "owned by test", Ports: []string{"tcp:443", "tcp:80"},
		Tags: []string{"tag:k8s"}, Annotations: map[string]string{"tailscale.com/owner-references": `{"ownerRefs":[]}`}}
	if err := api.CreateOrUpdate(ctx, web); err != nil {
		t.Fatal(err)
	}
	got, err := api.Get(ctx, "svc:web")
	if err != nil {
		t.Fatal(err)
	}
	v4, _ := serviceAddrs(t, got)
	if got.Comment != web.Comment || !slices.Equal(got.Ports, web.Ports) || !slices.Equal(got.Tags, web.Tags) ||
		got.Annotations["tailscale.com/owner-references"] != `{"ownerRefs":[]}` {
		t.Fatalf("Get = %+v, want what was put", got)
	}

	// An update without addrs keeps them.
	web.Comment, web.Ports = "changed", []string{"do-not-validate"}
	if err := api.CreateOrUpdate(ctx, web); err != nil {
		t.Fatal(err)
	}
	again, err := api.Get(ctx, "svc:web")
	if err != nil || again.Comment != "changed" || !slices.Equal(again.Addrs, got.Addrs) || again.Ports[0] != "do-not-validate" {
		t.Fatalf("after update: %+v, %v; want addrs %v kept", again, err, got.Addrs)
	}

	// Another service gets other addresses; an update bringing its own
	// addrs back is accepted.
	if err := api.CreateOrUpdate(ctx, tsapi.Service{Name: "svc:db", Ports: []string{"tcp:5432"}}); err != nil {
		t.Fatal(err)
	}
	db, err := api.Get(ctx, "svc:db")
	if err != nil {
		t.Fatal(err)
	}
	if dbv4, _ := serviceAddrs(t, db); dbv4 == v4 {
		t.Fatalf("two services share %v", v4)
	}
	if err := api.CreateOrUpdate(ctx, *db); err != nil {
		t.Fatalf("re-putting a service with its own addrs: %v", err)
	}
	list, err := api.List(ctx)
	if err != nil || len(list) != 2 || list[0].Name != "svc:db" || list[1].Name != "svc:web" {
		t.Fatalf("List = %+v, %v", list, err)
	}

	if err := api.Delete(ctx, "svc:db"); err != nil {
		t.Fatal(err)
	}
	if _, err := api.Get(ctx, "svc:db"); !tsapi.IsNotFound(err) {
		t.Fatalf("Get of a deleted service: %v, want 404", err)
	}
	if err := api.Delete(ctx, "svc:db"); !tsapi.IsNotFound(err) {
		t.Fatalf("Delete of a deleted service: %v, want 404", err)
	}
	if list, _ := api.List(ctx); len(list) != 1 {
		t.Fatalf("List after delete = %+v", list)
	}
}

// Bad requests are refused with 400 and the reason, and change nothing;
// no token, no access.
func TestServicesAPIRefusesBadInput(t *testing.T) {
	tn := startForTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	api := client0(t, tn).VIPServices()
	if err := api.CreateOrUpdate(ctx, tsapi.Service{Name: "svc:taken", Ports: []string{"tcp:80"}}); err != nil {
		t.Fatal(err)
	}
	taken, err := api.Get(ctx, "svc:taken")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		svc  tsapi.Service
		want string
	}{
		{tsapi.Service{Name: "web", Ports: []string{"tcp:80"}}, `invalid service name: "web" is not a valid service name: must start with 'svc:'`},
		{tsapi.Service{Name: "svc:-web", Ports: []string{"tcp:80"}}, `"-web" is not a valid DNS label: must start with a letter or number`},
		{tsapi.Service{Name: "svc:Web", Ports: []string{"tcp:80"}}, `must be lower case`},
		{tsapi.Service{Name: "svc:web"}, `ports: at least one is required`},
		{tsapi.Service{Name: "svc:web", Ports: []string{"http:80"}}, `ports: "http:80" must be "tcp:<port>", "udp:<port>"`},
		{tsapi.Service{Name: "svc:web", Ports: []string{"tcp:0"}}, `ports: "tcp:0": ports must be 1-65535`},
		{tsapi.Service{Name: "svc:web", Ports: []string{"tcp:90-80"}}, `ports: "tcp:90-80": ports must be 1-65535, and a range's first port not above its last`},
		{tsapi.Service{Name: "svc:web", Ports: []string{"do-not-validate", "tcp:80"}}, `"do-not-validate" cannot be combined`},
		{tsapi.Service{Name: "svc:web", Ports: []string{"tcp:80"}, Tags: []string{"k8s"}}, `tags: "k8s": tags must start with 'tag:'`},
		{tsapi.Service{Name: "svc:web", Ports: []string{"tcp:80"}, Addrs: []string{"100.64.0.7"}}, `addrs: 100.64.0.7 is outside devcluster's service range 100.100.0.0/16`},
		{tsapi.Service{Name: "svc:web", Ports: []string{"tcp:80"}, Addrs: []string{"100.100.100.100"}}, `is outside devcluster's service range`},
		{tsapi.Service{Name: "svc:web", Ports: []string{"tcp:80"}, Addrs: []string{"nope"}}, `addrs: "nope" is not an IP address`},
		{tsapi.Service{Name: "svc:web", Ports: []string{"tcp:80"}, Addrs: taken.Addrs[:1]}, `belongs to another service`},
	} {
		err := api.CreateOrUpdate(ctx, tc.svc)
		var apiErr tsapi.APIError
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("PUT %+v: %v, want an error containing %q", tc.svc, err, tc.want)
		} else if !errors.As(err, &apiErr) || apiErr.Status != http.StatusBadRequest {
			t.Errorf("PUT %+v: %#v, want status 400", tc.svc, err)
		}
	}
	if list, err := api.List(ctx); err != nil || len(list) != 1 {
		t.Fatalf("bad requests changed the services: %+v, %v", list, err)
	}

	// The body's name must match the path's.
	req, _ := http.NewRequestWithContext(ctx, http.MethodPut, tn.URL+"/api/v2/tailnet/-/vip-services/svc:a",
		strings.NewReader(`{"name":"svc:b","ports":["tcp:80"]}`))
	tok, _ := tn.store.issueToken(tn.ClientID, tn.ClientSecret)
	req.Header.Set("Authorization", "Bearer "+tok)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), `name \"svc:b\" in the body does not match \"svc:a\" in the path`) {
		t.Fatalf("mismatched names: %d %s", res.StatusCode, b)
	}

	// Without a token: 401.
	res, err = http.Get(tn.URL + "/api/v2/tailnet/-/vip-services")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("list without a token: %d, want 401", res.StatusCode)
	}
}

// A tailnet saved with the default policy of before Tailscale Services
// resumes with the current default, which lets tagged devices host them.
func TestPreviousDefaultPolicyIsUpgraded(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state.json")
	st, err := loadStore(state)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.setPolicy(previousDefaultPolicy); err != nil {
		t.Fatal(err)
	}
	tn := startAt(t, state, "127.0.0.1:0")
	defer tn.Close()
	raw, err := client0(t, tn).PolicyFile().Raw(context.Background())
	if err != nil || raw.HuJSON != DefaultPolicy {
		t.Fatalf("policy after resuming = %+v, %v; want DefaultPolicy", raw, err)
	}
	if !tn.routes.policy.serviceApproved("svc:any", nil, []string{"tag:k8s"}) {
		t.Fatal("the default policy does not let a tagged device host a service")
	}
}
