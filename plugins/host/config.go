package host

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"github.com/tailplane/tailplane/plugins/sdk/abi"
)

// FailurePolicy says what happens to a request when the plugin fails (trap,
// timeout, invalid answer, no instance available).
type FailurePolicy string

const (
	// FailClosed answers 503 with a generic body; the default.
	FailClosed FailurePolicy = "Closed"
	// FailOpen skips the plugin: the request continues with the decision the
	// plugin was given.
	FailOpen FailurePolicy = "Open"
)

// Defaults for Config's zero values. The deadline is wall-clock time, so it
// is generous: on a loaded 2-core node a microsecond call was seen to span
// 130 ms of wall time; the deadline exists to stop runaway guests.
const (
	DefaultTimeout     = time.Second
	DefaultMemoryLimit = 64 << 20
	DefaultPoolSize    = 4
	// MinMemoryLimit is what a Go guest needs to start (it reserves 2 MiB and
	// grows to about 2.4 MiB during init) plus headroom.
	MinMemoryLimit = 4 << 20
	pageSize       = 64 << 10
)

// Config describes one plugin to load.
type Config struct {
	// Name identifies the plugin in logs, metrics and errors.
	Name string
	// Module is the WebAssembly binary (already decompressed).
	Module []byte
	// SHA256, when set, is the hex sha256 Module must have.
	SHA256 string
	// PluginConfig is returned to the guest by get_config (typically JSON).
	PluginConfig []byte
	// Capabilities the plugin may use from tailplane_route_v1.
	Capabilities []abi.Capability
	// FailurePolicy defaults to FailClosed.
	FailurePolicy FailurePolicy
	// Timeout bounds every call into the guest; 0 means DefaultTimeout. A
	// negative value disables the deadline (trusted plugins only: it saves
	// about 0.1 µs per call but a looping guest then blocks forever). The
	// deadline is enforced by loop checks compiled into the module and one
	// watchdog goroutine per plugin (see instrument.go).
	Timeout time.Duration
	// MemoryLimit caps each instance's linear memory, in bytes (rounded down
	// to 64 KiB pages); 0 means DefaultMemoryLimit.
	MemoryLimit int64
	// PoolSize bounds the number of live instances (and so concurrent calls);
	// 0 means DefaultPoolSize.
	PoolSize int
	// Prewarm is how many instances are created at load, before any request;
	// 0 means 1, capped at PoolSize.
	Prewarm int
	// Env is the only environment the guest sees through WASI. The guest
	// never gets a filesystem or sockets.
	Env map[string]string
}

// withDefaults validates c and fills in defaults.
func (c Config) withDefaults() (Config, error) {
	if c.Name == "" {
		return c, fmt.Errorf("plugin config: name is empty")
	}
	if c.FailurePolicy == "" {
		c.FailurePolicy = FailClosed
	}
	if c.FailurePolicy != FailClosed && c.FailurePolicy != FailOpen {
		return c, fmt.Errorf("plugin %s: failure policy %q: want %q or %q", c.Name, c.FailurePolicy, FailOpen, FailClosed)
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.MemoryLimit == 0 {
		c.MemoryLimit = DefaultMemoryLimit
	}
	if c.MemoryLimit < MinMemoryLimit {
		return c, fmt.Errorf("plugin %s: memory limit %d bytes is below the minimum %d", c.Name, c.MemoryLimit, MinMemoryLimit)
	}
	if c.MemoryLimit > 4<<30 {
		return c, fmt.Errorf("plugin %s: memory limit %d bytes is above wasm32's 4 GiB", c.Name, c.MemoryLimit)
	}
	if c.PoolSize <= 0 {
		c.PoolSize = DefaultPoolSize
	}
	if c.Prewarm <= 0 {
		c.Prewarm = 1
	}
	if c.Prewarm > c.PoolSize {
		c.Prewarm = c.PoolSize
	}
	for _, cp := range c.Capabilities {
		switch cp {
		case abi.CapRoute, abi.CapIdentity, abi.CapFunnel:
		default:
			return c, fmt.Errorf("plugin %s: unknown capability %q (known: route, identity, funnel)", c.Name, cp)
		}
	}
	if c.SHA256 != "" {
		sum := sha256.Sum256(c.Module)
		got := hex.EncodeToString(sum[:])
		if !strings.EqualFold(got, c.SHA256) {
			return c, fmt.Errorf("plugin %s: %w: module has sha256 %s, config pins %s", c.Name, ErrSHA256Mismatch, got, strings.ToLower(c.SHA256))
		}
	}
	return c, nil
}

func (c Config) grants(cp abi.Capability) bool {
	if cp == "" {
		return true
	}
	for _, g := range c.Capabilities {
		if g == cp {
			return true
		}
	}
	return false
}

// memoryPages is the memory limit in wasm pages.
func (c Config) memoryPages() uint32 { return uint32(c.MemoryLimit / pageSize) }

// Digest returns the hex sha256 of module.
func Digest(module []byte) string {
	sum := sha256.Sum256(module)
	return hex.EncodeToString(sum[:])
}
