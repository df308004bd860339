package official

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/charmbracelet/log"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// The ProxyGroup case: the seed's ingress ProxyGroup (07) with two members,
// a LoadBalancer Service and an Ingress annotated tailscale.com/proxy-group
// (08), each served by both replicas as a Tailscale Service.
const (
	pgSeed = "examples/seed/07-proxygroup.yaml"
	// pgServiceHost and pgIngressHost are the members' Tailscale Service
	// names (tailscale.com/hostname; the Ingress's TLS host).
	pgServiceHost = "pg-postgres"
	pgIngressHost = "pg-app"
)

// pgMembers are the seed's LoadBalancer Service and Ingress made members of
// the group as 08 makes a Service one: the annotation tailscale.com/proxy-group
// (and tailscale.com/hostname on the Service), other names so that they do
// not meet the dedicated cases' devices.
func (e *Env) pgMembers(group string) ([]*unstructured.Unstructured, error) {
	svc, err := e.seedObject("examples/seed/02-service-loadbalancer.yaml", map[string]string{
		"tailscale.com/proxy-group": group, "tailscale.com/hostname": pgServiceHost})
	if err != nil {
		return nil, err
	}
	svc.SetName("pg-postgres")
	ing, err := e.seedObject("examples/seed/03-ingress.yaml", map[string]string{"tailscale.com/proxy-group": group})
	if err != nil {
		return nil, err
	}
	ing.SetName("pg-app")
	if err := unstructured.SetNestedSlice(ing.Object, []any{map[string]any{"hosts": []any{pgIngressHost}}}, "spec", "tls"); err != nil {
		return nil, err
	}
	return []*unstructured.Unstructured{svc, ing}, nil
}

// proxyGroupAlone compares what each operator writes for an ingress
// ProxyGroup and its members, with the other operator scaled to zero: a
// ProxyGroup is cluster-scoped and has no class, so both operators would
// serve it at once. Each member must answer through the tailnet under its
// Tailscale Service's name before the snapshots are taken; the Tailscale
// Services' own contents (ports, tags, annotations) are compared too.
func (e *Env) proxyGroupAlone(ctx context.Context, domain string, logger *log.Logger) ([]CompatRow, []string, error) {
	sides := Sides()
	var snaps [2]map[string]Snapshot
	var notes []string
	for i, s := range sides {
		other := sides[1-i]
		if err := e.Cluster.ScaleOperator(ctx, other.Namespace, 0); err != nil {
			return nil, nil, err
		}
		snap, n, err := e.proxyGroupSide(ctx, s, domain, logger)
		if err != nil {
			return nil, nil, fmt.Errorf("ProxyGroup, %s: %w", s.Name, err)
		}
		snaps[i], notes = snap, append(notes, n...)
		if err := e.Cluster.ScaleOperator(ctx, other.Namespace, 1); err != nil {
			return nil, nil, err
		}
	}
	var rows []CompatRow
	for _, c := range pgCases() {
		rows = append(rows, Compare(c, snaps[0][c], snaps[1][c])...)
	}
	return rows, notes, nil
}

// pgCases are the ProxyGroup case's rows, in the table's order.
func pgCases() []string {
	return []string{"ProxyGroup (ingress, 2 replicas)", "ProxyGroup member: LoadBalancer Service", "ProxyGroup member: Ingress"}
}

// proxyGroupSide applies the group and its members for side s, waits for
// each member to answer, snapshots the three objects, then deletes them
// and waits for the replicas' devices to leave.
func (e *Env) proxyGroupSide(ctx context.Context, s Side, domain string, logger *log.Logger) (map[string]Snapshot, []string, error) {
	var notes []string
	pg, err := e.seedObject(pgSeed, nil)
	if err != nil {
		return nil, nil, err
	}
	pg.SetNamespace("")
	members, err := e.pgMembers(pg.GetName())
	if err != nil {
		return nil, nil, err
	}
	for i := range members {
		members[i] = ForSide(members[i], s)
	}
	if _, err := e.Cluster.Apply(ctx, pg); err != nil {
		return nil, nil, err
	}
	urls := []string{"http://" + pgServiceHost + "." + domain + ":5432/", "https://" + pgIngressHost + "." + domain + "/"}
	for i, m := range members {
		d, err := e.Cluster.FirstSuccess(ctx, m, HTTPProbe(e.Probe, urls[i], http.StatusOK), 3*time.Minute)
		if err != nil {
			notes = append(notes, fmt.Sprintf("ProxyGroup member %s %s, %s: never served (%v); proxy pods: %s", m.GetKind(), m.GetName(), s.Name, err, e.podSummary(ctx, s.Namespace)))
			continue
		}
		logger.Info("exposed", "case", "ProxyGroup member "+m.GetKind(), "operator", s.Name, "apply to first success", d.Round(time.Millisecond))
	}
	out := map[string]Snapshot{}
	for i, o := range append([]*unstructured.Unstructured{pg}, members...) {
		snap, err := e.settledSnapshot(ctx, o, s, logger)
		if err != nil {
			return nil, nil, err
		}
		if i > 0 {
			host := []string{pgServiceHost, pgIngressHost}[i-1]
			if snap.TailscaleService, err = e.Tailnet.ServiceSummary(ctx, "svc:"+host); err != nil {
				return nil, nil, err
			}
		}
		out[pgCases()[i]] = snap
	}
	start := time.Now()
	for _, o := range append(members, pg) {
		if err := e.Cluster.Delete(ctx, o, 3*time.Minute); err != nil {
			return nil, nil, err
		}
	}
	hosts := []string{pg.GetName() + "-0", pg.GetName() + "-1"}
	if _, err := DevicesGone(ctx, e.Tailnet, hosts, start, time.Minute); err != nil {
		notes = append(notes, fmt.Sprintf("ProxyGroup, %s: replicas' devices still on the tailnet a minute after the group was deleted (%v); the harness removed them", s.Name, err))
		if _, err := e.deleteDevicesOf(ctx, hosts); err != nil {
			return nil, nil, err
		}
	}
	for _, host := range []string{pgServiceHost, pgIngressHost} {
		if left, err := e.Tailnet.ServiceSummary(ctx, "svc:"+host); err != nil {
			return nil, nil, err
		} else if left != "(absent)" {
			notes = append(notes, fmt.Sprintf("ProxyGroup, %s: Tailscale Service svc:%s still exists after its member was deleted (%s)", s.Name, host, left))
		}
	}
	return out, notes, nil
}

// tailscaleService is the part of the tailnet API's Tailscale Service that
// the compatibility table compares.
type tailscaleService struct {
	Name        string            `json:"name"`
	Ports       []string          `json:"ports"`
	Tags        []string          `json:"tags"`
	Comment     string            `json:"comment"`
	Annotations map[string]string `json:"annotations"`
	Addrs       []string          `json:"addrs"`
}

// SummarizeService is a Tailscale Service as one comparable line: its
// ports and tags, whether it has a comment, its annotations' keys and its
// addresses' families (values that differ on every run become their shape).
func SummarizeService(s tailscaleService) string {
	var addrs, keys []string
	for _, a := range s.Addrs {
		addrs = append(addrs, Shape(a))
	}
	for k := range s.Annotations {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	ports, tags := slices.Sorted(slices.Values(s.Ports)), slices.Sorted(slices.Values(s.Tags))
	return fmt.Sprintf("ports=%s tags=%s comment=%t annotations=%s addrs=%s", strings.Join(ports, ","), strings.Join(tags, ","),
		s.Comment != "", strings.Join(keys, ","), strings.Join(addrs, ","))
}

// ServiceSummary reads the Tailscale Service name through the tailnet API
// and summarizes it (SummarizeService), or says "(absent)".
func (e TailnetEnv) ServiceSummary(ctx context.Context, name string) (string, error) {
	client, base, err := e.apiClient(ctx)
	if err != nil {
		return "", err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/v2/tailnet/-/vip-services/"+name, nil)
	if err != nil {
		return "", err
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", fmt.Errorf("get Tailscale Service %s: %w", name, err)
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusNotFound:
		return "(absent)", nil
	case http.StatusOK:
	default:
		return "", fmt.Errorf("get Tailscale Service %s: %s", name, resp.Status)
	}
	var s tailscaleService
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		return "", fmt.Errorf("get Tailscale Service %s: %w", name, err)
	}
	return SummarizeService(s), nil
}
