package plugins

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/tailplane/tailplane/plugins/host"
)

// moduleCache keeps the modules a proxy fetched on disk, named by their
// sha256: a proxy restarted with the same scratch folder, or a plugin whose
// settings changed but not its module, loads without reading the module
// from the API server again. Entries are checked against their name when
// read, so a damaged file is a miss, never a wrong module.
type moduleCache struct {
	dir string // "" disables the cache
}

func isDigest(s string) bool {
	if len(s) != 64 {
		return false
	}
	return strings.Trim(s, "0123456789abcdef") == ""
}

// get returns the module with digest, if cached.
func (c moduleCache) get(digest string) ([]byte, bool) {
	digest = strings.ToLower(digest)
	if c.dir == "" || !isDigest(digest) {
		return nil, false
	}
	path := filepath.Join(c.dir, digest+".wasm")
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, false
	}
	if host.Digest(b) != digest {
		_ = os.Remove(path)
		return nil, false
	}
	return b, true
}

// put stores module under its digest (write then rename: a reader never
// sees half a file).
func (c moduleCache) put(digest string, module []byte) error {
	if c.dir == "" || !isDigest(digest) {
		return nil
	}
	if err := os.MkdirAll(c.dir, 0o700); err != nil {
		return fmt.Errorf("module cache: %w", err)
	}
	f, err := os.CreateTemp(c.dir, digest+".*.tmp")
	if err != nil {
		return fmt.Errorf("module cache: %w", err)
	}
	_, werr := f.Write(module)
	cerr := f.Close()
	if werr != nil || cerr != nil {
		_ = os.Remove(f.Name())
		return fmt.Errorf("module cache: write %s: %v %v", f.Name(), werr, cerr)
	}
	if err := os.Rename(f.Name(), filepath.Join(c.dir, digest+".wasm")); err != nil {
		_ = os.Remove(f.Name())
		return fmt.Errorf("module cache: %w", err)
	}
	return nil
}

// SeedModuleCache puts module into the disk cache of a Manager whose
// CacheDir is cacheDir, as its first fetch would (benchmarks and tools).
func SeedModuleCache(cacheDir string, module []byte) error {
	return moduleCache{dir: filepath.Join(cacheDir, "modules")}.put(host.Digest(module), module)
}
