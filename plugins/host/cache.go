package host

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"sync"

	"github.com/tetratelabs/wazero"
)

// ErrCache: wazero's file compilation cache could not be read or written
// (its folder was removed or is not writable). Load never fails with it: it
// renews the cache, then falls back to compiling in memory.
var ErrCache = errors.New("compilation cache unavailable")

// compilationCache is the Engine's wazero cache. wazero creates the cache
// folder once, when the cache is made, and from then on fails every compile
// whose result it cannot write (an "open <hash>.<n>.tmp: no such file or
// directory" once the folder is gone, e.g. an emptyDir cleaned under a
// running proxy). So a cache that failed is replaced: a new file cache
// recreates the folder. Replaced caches stay open until the Engine closes,
// since plugins compiled with them still run on their engines.
type compilationCache struct {
	dir string // "" for an in-memory cache

	mu      sync.Mutex
	current wazero.CompilationCache
	retired []wazero.CompilationCache
}

func newCompilationCache(dir string) (*compilationCache, error) {
	c := &compilationCache{dir: dir}
	if dir == "" {
		c.current = wazero.NewCompilationCache()
		return c, nil
	}
	fc, err := wazero.NewCompilationCacheWithDir(dir)
	if err != nil {
		return nil, fmt.Errorf("plugin compilation cache in %s: %w", dir, err)
	}
	c.current = fc
	return c, nil
}

// get returns the cache to compile with.
func (c *compilationCache) get() wazero.CompilationCache {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.current
}

// renew replaces failed (when it is still the current cache) with a new
// file cache, which recreates the folder; if that fails too, with an
// in-memory cache. It returns the cache to compile with.
func (c *compilationCache) renew(failed wazero.CompilationCache) (wazero.CompilationCache, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.current != failed {
		return c.current, nil // another load renewed it already
	}
	next, err := wazero.NewCompilationCacheWithDir(c.dir)
	if err != nil {
		next = wazero.NewCompilationCache()
	}
	c.retired = append(c.retired, c.current)
	c.current = next
	return next, err
}

// memory returns a fresh in-memory cache, owned by the compilationCache.
func (c *compilationCache) memory() wazero.CompilationCache {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := wazero.NewCompilationCache()
	c.retired = append(c.retired, m)
	return m
}

func (c *compilationCache) close(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	errs := []error{c.current.Close(ctx)}
	for _, r := range c.retired {
		errs = append(errs, r.Close(ctx))
	}
	return errors.Join(errs...)
}

// isCacheError reports whether a compile error is the file cache's I/O
// rather than the module's fault: wazero returns the *fs.PathError of its
// cache files as is.
func isCacheError(err error) bool {
	var pe *fs.PathError
	return errors.As(err, &pe)
}
