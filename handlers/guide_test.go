package handlers

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// registeredModules are the packages whose Register register.go's Register
// calls, by folder name.
func registeredModules(t *testing.T) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "register.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var mods []string
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		if sel, ok := call.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "Register" {
			if pkg, ok := sel.X.(*ast.Ident); ok {
				mods = append(mods, pkg.Name)
			}
		}
		return true
	})
	slices.Sort(mods)
	return mods
}

// Every folder of handlers/ that has a Register is wired in register.go,
// and every registered module is one such folder: libraries live in
// handlers/lib and register nothing.
func TestEveryModuleFolderIsRegistered(t *testing.T) {
	registered := registeredModules(t)
	if len(registered) < 12 {
		t.Fatalf("register.go registers %v: expected at least the 12 modules", registered)
	}
	dirs, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	var folders []string
	for _, d := range dirs {
		if !d.IsDir() || d.Name() == "lib" || d.Name() == "bench" || d.Name() == "testdata" {
			continue
		}
		folders = append(folders, d.Name())
		src, err := os.ReadFile(filepath.Join(d.Name(), "register.go"))
		if err != nil || !strings.Contains(string(src), "\nfunc Register(") {
			t.Errorf("handlers/%s is not a module (no Register in its register.go): libraries belong in handlers/lib", d.Name())
		}
	}
	slices.Sort(folders)
	if !slices.Equal(folders, registered) {
		t.Errorf("module folders %v, but register.go registers %v", folders, registered)
	}
	libs, err := os.ReadDir("lib")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range libs {
		if _, err := os.Stat(filepath.Join("lib", d.Name(), "register.go")); err == nil {
			t.Errorf("handlers/lib/%s has a register.go: a library registers nothing", d.Name())
		}
	}
}

// The guide (handlers/README.md) lists every registered module in its
// table of modules, and the package doc (doc.go) in its list of modules, so
// that a new contributor finds each one.
func TestGuideAndDocListEveryModule(t *testing.T) {
	guide, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	// doc.go's list of modules: from "handlers/<module>:" to the libraries.
	doc := string(src)
	start, end := strings.Index(doc, "handlers/<module>:"), strings.Index(doc, "handlers/lib/<library>:")
	if start < 0 || end < start {
		t.Fatal("doc.go has no list of modules (handlers/<module>: ... handlers/lib/<library>:)")
	}
	modules := doc[start:end]
	for _, m := range registeredModules(t) {
		if !strings.Contains(string(guide), "| `"+m+"` |") {
			t.Errorf("handlers/README.md's table of modules has no row for the registered module %s", m)
		}
		if !regexp.MustCompile(`\b` + m + `\b`).MatchString(modules) {
			t.Errorf("doc.go's list of modules does not name the registered module %s", m)
		}
	}
}

// Libraries import no module, and proxygroup, the group's module, imports
// none either: its members' kinds live in their own modules and reach it
// through lib/groupmember's registry, so that a new kind of member (a
// Gateway's routes) changes no line of the group.
func TestLibrariesAndTheGroupImportNoModule(t *testing.T) {
	dirs, err := filepath.Glob("lib/*")
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range append(dirs, "proxygroup") {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, file := range files {
			if strings.HasSuffix(file, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.ImportsOnly)
			if err != nil {
				t.Fatal(err)
			}
			for _, imp := range f.Imports {
				path := strings.Trim(imp.Path.Value, `"`)
				if rest, ok := strings.CutPrefix(path, "github.com/tailplane/tailplane/handlers/"); ok && !strings.HasPrefix(rest, "lib/") {
					t.Errorf("%s imports the module %s: only handlers/lib may be imported there", file, path)
				}
			}
		}
	}
}
