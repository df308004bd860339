// Package registry is devcluster's local OCI registry: go-containerregistry's
// pkg/registry on loopback, where plugin authors push their modules (go tool
// task plugin:push REF=<address>/name:tag) and the operator pulls them from
// (a RoutingPlugin's spec.module.oci.ref). Loopback registries are spoken to
// over plain HTTP by go-containerregistry, so no certificate is involved.
//
// Blobs are kept in the cluster folder; tags live in memory, so a restarted
// devcluster has forgotten them: push again. RoutingPlugins pinned by sha256
// keep running meanwhile from the operator's copy of the module.
//
// It imports go-containerregistry and the standard library.
package registry

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	ggcr "github.com/google/go-containerregistry/pkg/registry"
)

// EnvFile is the file of the cluster folder that holds REGISTRY=<host:port>.
const EnvFile = "registry.env"

// Registry is a running registry.
type Registry struct {
	// Addr is host:port, e.g. 127.0.0.1:40123.
	Addr string
	srv  *http.Server
	done chan error
}

// Start serves a registry on loopback, on the port it had the last time
// for this cluster folder when that port is free, and writes dir/EnvFile.
func Start(dir string) (*Registry, error) {
	blobs := filepath.Join(dir, "registry", "blobs")
	if err := os.MkdirAll(blobs, 0o755); err != nil {
		return nil, fmt.Errorf("registry: %w", err)
	}
	envPath := filepath.Join(dir, EnvFile)
	var ln net.Listener
	if prev := Address(dir); prev != "" {
		ln, _ = net.Listen("tcp", prev)
	}
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			return nil, fmt.Errorf("registry: listen: %w", err)
		}
	}
	h := ggcr.New(ggcr.WithBlobHandler(ggcr.NewDiskBlobHandler(blobs)), ggcr.Logger(log.New(io.Discard, "", 0)))
	r := &Registry{Addr: ln.Addr().String(), srv: &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}, done: make(chan error, 1)}
	go func() { r.done <- r.srv.Serve(ln) }()
	if err := os.WriteFile(envPath, []byte("REGISTRY="+r.Addr+"\n"), 0o644); err != nil {
		_ = r.Close()
		return nil, fmt.Errorf("registry: %w", err)
	}
	return r, nil
}

// Address returns the registry address written for the cluster folder dir,
// "" if there is none.
func Address(dir string) string {
	f, err := os.Open(filepath.Join(dir, EnvFile))
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "REGISTRY="); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// Close stops the registry.
func (r *Registry) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := r.srv.Shutdown(ctx)
	if serr := <-r.done; serr != nil && !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	if err != nil {
		return fmt.Errorf("registry: %w", err)
	}
	return nil
}
