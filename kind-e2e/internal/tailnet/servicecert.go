package tailnet

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"

	"tailscale.com/tailcfg"
)

// serveSetDNS lets a service host publish the DNS-01 record for its
// service's name, so it can get that name's certificate, and a node of a
// tailnet other than the first the record for its own name. testcontrol
// only accepts records for a node's own name in its MagicDNS domain (after
// checking that the node key belongs to the Noise session's machine, which
// only it can see): a service name the node is an approved host of, or the
// node's name in its tailnet's domain, is passed to it as the node's own
// name there, and txtName restores it before the record is published.
func (t *Tailnet) serveSetDNS(w http.ResponseWriter, r *http.Request, next http.Handler) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var req tailcfg.SetDNSRequest
	if json.Unmarshal(body, &req) == nil {
		if base, ok := strings.CutPrefix(req.Name, "_acme-challenge."); ok && (t.hostsServiceName(req, base) || t.ownNameElsewhere(req, base)) {
			n := t.Control.Node(req.NodeKey)
			t.txtMu.Lock()
			t.pendingTXT[req.NodeKey.String()+" "+req.Value] = req.Name
			t.txtMu.Unlock()
			req.Name = "_acme-challenge." + n.Hostinfo.Hostname() + "." + t.Control.MagicDNSDomain
			if b, err := json.Marshal(req); err == nil {
				body = b
			}
		}
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	next.ServeHTTP(w, r)
}

// hostsServiceName reports whether the node sending req hosts a service
// named fqdn (its map lists it in CertDomains).
func (t *Tailnet) hostsServiceName(req tailcfg.SetDNSRequest, fqdn string) bool {
	if t.Control.Node(req.NodeKey) == nil {
		return false
	}
	t.routeMu.Lock()
	defer t.routeMu.Unlock()
	return slices.Contains(t.routes.served[req.NodeKey].certDomains, strings.TrimSuffix(fqdn, "."))
}

// ownNameElsewhere reports whether fqdn is the name of the node sending
// req in its tailnet's MagicDNS domain, when that is not the control
// server's.
func (t *Tailnet) ownNameElsewhere(req tailcfg.SetDNSRequest, fqdn string) bool {
	n := t.Control.Node(req.NodeKey)
	return n != nil && t.MagicDNSDomain != t.Control.MagicDNSDomain &&
		strings.TrimSuffix(fqdn, ".") == n.Hostinfo.Hostname()+"."+t.MagicDNSDomain
}

// txtName is the name a record accepted by testcontrol is published
// under: the service name serveSetDNS passed as the node's own, if any.
func (t *Tailnet) txtName(req *tailcfg.SetDNSRequest) string {
	t.txtMu.Lock()
	defer t.txtMu.Unlock()
	k := req.NodeKey.String() + " " + req.Value
	if name, ok := t.pendingTXT[k]; ok {
		delete(t.pendingTXT, k)
		return name
	}
	return req.Name
}
