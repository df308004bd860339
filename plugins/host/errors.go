package host

import (
	"context"
	"errors"

	"github.com/tetratelabs/wazero/sys"
)

// Load errors, wrapped with the plugin's name and details; test with errors.Is.
var (
	// ErrNotWasm: the module does not parse as WebAssembly.
	ErrNotWasm = errors.New("not a WebAssembly module")
	// ErrMissingExport: an export the http-wasm ABI requires is absent or has
	// the wrong signature.
	ErrMissingExport = errors.New("missing or mistyped export")
	// ErrABIVersion: the guest imports a routing-module version (or an
	// http_handler function) this host does not provide.
	ErrABIVersion = errors.New("unsupported ABI version")
	// ErrCapability: the guest imports routing functions its config does not grant.
	ErrCapability = errors.New("capability not granted")
	// ErrUnknownImport: the guest imports a module the host never provides.
	ErrUnknownImport = errors.New("unknown import module")
	// ErrCommandModule: the guest is a WASI command (it ran main and exited)
	// rather than a reactor.
	ErrCommandModule = errors.New("module is a WASI command, not a reactor")
	// ErrSHA256Mismatch: the module's digest differs from the pinned one.
	ErrSHA256Mismatch = errors.New("sha256 mismatch")
)

// IsDeadline reports whether err is a guest's initialisation or call that
// ran out of time. On a busy machine that says nothing about the module,
// so it is worth trying again, unlike the other errors of Load.
func IsDeadline(err error) bool {
	var exit *sys.ExitError
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) ||
		(errors.As(err, &exit) && (exit.ExitCode() == sys.ExitCodeDeadlineExceeded || exit.ExitCode() == sys.ExitCodeContextCanceled))
}
