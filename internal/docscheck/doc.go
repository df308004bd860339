// Package docscheck holds a test, run by `go test ./...` and so by CI, that
// keeps the documentation's references true: every `go tool task NAME` in
// README.md and docs/*.md names a task of Taskfile.yml that can be run,
// every relative Markdown link resolves, and every path of this repository
// that a command block names exists.
//
// It has no code; its test imports sigs.k8s.io/yaml and the standard
// library.
package docscheck
