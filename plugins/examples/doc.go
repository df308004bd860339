// Package examples holds example routing plugins, one per folder, each a
// plain Go guest built with
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared
//
// (`go tool task plugins` builds them all, with the AssemblyScript one, into
// .cache/plugins). The tests here load every example into the real host.
package examples
