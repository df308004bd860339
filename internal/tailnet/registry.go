package tailnet

import (
	"errors"
	"fmt"
	"sort"
	"sync"
)

// ErrNoTailnet is returned by Registry.For for a tailnet no Tailnet object
// registered (none exists, or the operator has not checked it yet).
var ErrNoTailnet = errors.New("no such Tailnet, or the operator has not checked it yet")

// ErrNotReady is returned by Registry.For for a Tailnet whose credentials
// did not pass the operator's check.
var ErrNotReady = errors.New("not ready")

// Registry maps tailnet names (Tailnet objects) to their backends: the
// official operator's tsclient.Provider. The name "" is the operator's own
// tailnet, whose backend is fixed at creation. It is safe for concurrent
// use; one Registry is shared by the operator's handlers (no package
// state).
type Registry struct {
	def Backend

	mu      sync.Mutex
	entries map[string]entry
}

type entry struct {
	backend Backend // nil while not ready
	why     string  // why it is not ready
}

// NewRegistry returns a registry whose "" tailnet is def.
func NewRegistry(def Backend) *Registry {
	return &Registry{def: def, entries: map[string]entry{}}
}

// For returns the backend of tailnet name ("" for the operator's own), or
// an error wrapping ErrNoTailnet or ErrNotReady that says why it cannot be
// used.
func (r *Registry) For(name string) (Backend, error) {
	if name == "" {
		return r.def, nil
	}
	r.mu.Lock()
	e, ok := r.entries[name]
	r.mu.Unlock()
	switch {
	case !ok:
		return nil, fmt.Errorf("tailnet %q: %w", name, ErrNoTailnet)
	case e.backend == nil:
		return nil, fmt.Errorf("tailnet %q: %w: %s", name, ErrNotReady, e.why)
	}
	return e.backend, nil
}

// Set registers the backend of a Tailnet whose credentials work.
func (r *Registry) Set(name string, b Backend) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.entries[name] = entry{backend: b}
}

// SetNotReady records that Tailnet name exists but cannot be used, and why;
// its backend, if any, is dropped.
func (r *Registry) SetNotReady(name, why string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.entries[name] = entry{why: why}
}

// Remove forgets Tailnet name (deleted).
func (r *Registry) Remove(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.entries, name)
}

// Ready returns the names of the Tailnets whose backends are registered,
// sorted, without "".
func (r *Registry) Ready() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for name, e := range r.entries {
		if e.backend != nil {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// All returns the operator's own backend, then those of every ready
// Tailnet (in name order): where to look for what the operator may have
// created in any tailnet.
func (r *Registry) All() []Backend {
	out := []Backend{r.def}
	for _, name := range r.Ready() {
		if b, err := r.For(name); err == nil {
			out = append(out, b)
		}
	}
	return out
}
