package tailnettest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"sort"
)

// Service is a Tailscale Service the server knows, in the API's JSON.
type Service struct {
	Name        string            `json:"name,omitempty"`
	Addrs       []string          `json:"addrs,omitempty"`
	Comment     string            `json:"comment,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
	Ports       []string          `json:"ports,omitempty"`
	Tags        []string          `json:"tags,omitempty"`
}

// EndpointServices names every Tailscale Services endpoint for Fail.
const EndpointServices = "services"

var serviceName = regexp.MustCompile(`^svc:[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// Services returns the Tailscale Services that exist, by name.
func (s *Server) Services() map[string]Service {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]Service, len(s.services))
	for k, v := range s.services {
		out[k] = v
	}
	return out
}

// PutService stores a Tailscale Service as if someone else had made it.
func (s *Server) PutService(svc Service) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.services[svc.Name] = svc
}

func (s *Server) registerServices(mux *http.ServeMux) {
	mux.HandleFunc("GET /api/v2/tailnet/{tailnet}/vip-services", s.authorized(EndpointServices, s.listServices))
	mux.HandleFunc("GET /api/v2/tailnet/{tailnet}/vip-services/{name}", s.authorized(EndpointServices, s.getService))
	mux.HandleFunc("PUT /api/v2/tailnet/{tailnet}/vip-services/{name}", s.authorized(EndpointServices, s.putService))
	mux.HandleFunc("DELETE /api/v2/tailnet/{tailnet}/vip-services/{name}", s.authorized(EndpointServices, s.deleteService))
}

func (s *Server) listServices(w http.ResponseWriter, _ *http.Request) {
	list := []Service{}
	for _, svc := range s.Services() {
		list = append(list, svc)
	}
	sort.Slice(list, func(i, j int) bool { return list[i].Name < list[j].Name })
	writeJSON(w, http.StatusOK, map[string]any{"vipServices": list})
}

func (s *Server) getService(w http.ResponseWriter, r *http.Request) {
	svc, ok := s.Services()[r.PathValue("name")]
	if !ok {
		writeJSON(w, http.StatusNotFound, map[string]any{"message": "not found"})
		return
	}
	writeJSON(w, http.StatusOK, svc)
}

// putService creates or updates; addresses are allocated at creation (from
// 100.100.0.0/16 here) and kept afterwards, as control does.
func (s *Server) putService(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	var svc Service
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&svc); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"message": "invalid JSON: " + err.Error()})
		return
	}
	if !serviceName.MatchString(name) || (svc.Name != "" && svc.Name != name) {
		writeJSON(w, http.StatusBadRequest, map[string]any{"message": fmt.Sprintf("invalid service name %q", name)})
		return
	}
	svc.Name = name
	s.mu.Lock()
	if old, ok := s.services[name]; ok {
		svc.Addrs = old.Addrs
	} else if len(svc.Addrs) == 0 {
		s.nextServiceIP++
		n := s.nextServiceIP
		svc.Addrs = []string{fmt.Sprintf("100.100.%d.%d", n>>8, n&0xff), fmt.Sprintf("fd7a:115c:a1e0::6464:%x", n)}
	}
	s.services[name] = svc
	hook := s.onPutService
	s.mu.Unlock()
	w.WriteHeader(http.StatusOK)
	if hook != nil {
		hook(svc)
	}
}

// OnPutService calls fn with every Tailscale Service stored through the
// API, after storing it (to fail or stop things between two calls).
func (s *Server) OnPutService(fn func(Service)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onPutService = fn
}

func (s *Server) deleteService(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	s.mu.Lock()
	_, ok := s.services[name]
	delete(s.services, name)
	s.mu.Unlock()
	if !ok {
		writeJSON(w, http.StatusNotFound, map[string]any{"message": "not found"})
		return
	}
	w.WriteHeader(http.StatusOK)
}
