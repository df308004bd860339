package cluster

import (
	"strings"
	"sync"
	"time"
)

// appliedTTL is the default of Deps.ApplyRefresh: how long an identical
// server-side apply is skipped without a look. A parent is typically handled
// several times within seconds of its creation (its own cycle, its proxy's
// first state), and some again every few seconds (an ExternalName that does
// not resolve yet); re-sending unchanged objects then only costs API calls
// and writes. After the TTL the live object is read: an apply is sent only
// when it no longer holds what was applied (changed or deleted behind the
// operator's back), which repairs it.
const appliedTTL = time.Minute

// appliedCache remembers the digest of the last apply of each object, and
// which optional objects are known to be absent (deleted, or never there).
type appliedCache struct {
	mu   sync.Mutex
	m    map[string]appliedEntry
	gone map[string]struct{}
}

type appliedEntry struct {
	sum [32]byte
	at  time.Time
}

// fresh reports whether sum was applied under key less than ttl ago.
func (c *appliedCache) fresh(key string, sum [32]byte, ttl time.Duration) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[key]
	return ok && e.sum == sum && time.Since(e.at) < ttl
}

// sent reports whether the last apply under key sent sum, however long ago.
func (c *appliedCache) sent(key string, sum [32]byte) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[key]
	return ok && e.sum == sum
}

func (c *appliedCache) remember(key string, sum [32]byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]appliedEntry{}
	}
	now := time.Now()
	if len(c.m) > 4096 { // drop stale entries so the map stays small
		for k, e := range c.m {
			if now.Sub(e.at) >= appliedTTL {
				delete(c.m, k)
			}
		}
	}
	c.m[key] = appliedEntry{sum: sum, at: now}
}

// absent records that the object under key does not exist.
func (c *appliedCache) absent(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gone == nil {
		c.gone = map[string]struct{}{}
	}
	c.gone[key] = struct{}{}
}

// present records that the object under key exists again.
func (c *appliedCache) present(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.gone, key)
}

func (c *appliedCache) isAbsent(key string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.gone[key]
	return ok
}

func (c *appliedCache) forget(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, key)
}

// forgetProxy forgets every object of one proxy (named base or base-*, in
// namespace ns) after it was deleted, so that a new one is applied in full.
func (c *appliedCache) forgetProxy(ns, base string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range c.m {
		if strings.Contains(k, "/"+ns+"/"+base) {
			delete(c.m, k)
		}
	}
	for k := range c.gone {
		if strings.Contains(k, "/"+ns+"/"+base) {
			delete(c.gone, k)
		}
	}
}
