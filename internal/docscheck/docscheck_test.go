package docscheck

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// root is the repository's root: two folders up from this package.
const root = "../.."

// docs are the files checked: README.md, docs/*.md and the READMEs of
// deploy/ and examples/.
func docs(t *testing.T) []string {
	t.Helper()
	var files []string
	for _, pattern := range []string{"README.md", "docs/*.md", "deploy/README.md", "deploy/*/README.md", "examples/README.md", "examples/*/README.md", "handlers/README.md"} {
		m, err := filepath.Glob(filepath.Join(root, pattern))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	if len(files) < 10 {
		t.Fatalf("found only %v", files)
	}
	return files
}

// tasks are Taskfile.yml's tasks that can be run: name -> true, internal
// ones -> false.
func tasks(t *testing.T) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "Taskfile.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var tf struct {
		Tasks map[string]struct {
			Internal bool `json:"internal"`
		} `json:"tasks"`
	}
	if err := yaml.Unmarshal(b, &tf); err != nil {
		t.Fatalf("Taskfile.yml: %v", err)
	}
	out := map[string]bool{}
	for name, task := range tf.Tasks {
		out[name] = !task.Internal
	}
	if len(out) < 10 {
		t.Fatalf("Taskfile.yml has only %d tasks", len(out))
	}
	return out
}

// line is one line of a document with its place.
type line struct {
	file string // relative to root
	n    int
	text string
	// lang is the fenced code block's language ("" outside one; "text"
	// for a fence without one).
	lang    string
	inBlock bool
}

func (l line) String() string { return fmt.Sprintf("%s:%d", l.file, l.n) }

func readLines(t *testing.T, path string) []line {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	rel, _ := filepath.Rel(root, path)
	var out []line
	var inBlock bool
	var lang string
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		text := sc.Text()
		if fence, ok := strings.CutPrefix(strings.TrimSpace(text), "```"); ok {
			if inBlock {
				inBlock, lang = false, ""
			} else {
				inBlock, lang = true, strings.TrimSpace(fence)
			}
			continue
		}
		out = append(out, line{file: rel, n: n, text: text, lang: lang, inBlock: inBlock})
	}
	return out
}

var taskRef = regexp.MustCompile("go tool task ([a-z][a-z0-9:_-]*)")

// Every `go tool task NAME` names a task that runs.
func TestTaskNamesExist(t *testing.T) {
	known := tasks(t)
	checked := 0
	for _, f := range docs(t) {
		for _, l := range readLines(t, f) {
			for _, m := range taskRef.FindAllStringSubmatch(l.text, -1) {
				checked++
				switch runnable, ok := known[m[1]]; {
				case !ok:
					t.Errorf("%s: `go tool task %s`: Taskfile.yml has no task %s", l, m[1], m[1])
				case !runnable:
					t.Errorf("%s: `go tool task %s`: task %s is internal (cannot be run)", l, m[1], m[1])
				}
			}
		}
	}
	if checked < 20 {
		t.Fatalf("only %d task references found: is the pattern broken?", checked)
	}
}

var mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// Every relative Markdown link resolves to a file or folder.
func TestRelativeLinksResolve(t *testing.T) {
	checked := 0
	for _, f := range docs(t) {
		for _, l := range readLines(t, f) {
			if l.inBlock {
				continue
			}
			for _, m := range mdLink.FindAllStringSubmatch(l.text, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") || strings.HasPrefix(target, "#") {
					continue
				}
				target, _, _ = strings.Cut(target, "#")
				checked++
				if _, err := os.Stat(filepath.Join(root, filepath.Dir(l.file), target)); err != nil {
					t.Errorf("%s: link %s does not resolve: %v", l, m[1], err)
				}
			}
		}
	}
	if checked < 5 {
		t.Fatalf("only %d relative links found: is the pattern broken?", checked)
	}
}

// repoPath is a path of this repository as a command names it: under one
// of its top-level folders or a top-level file, maybe after ./, ending
// before a quote, a space, a colon or a closing bracket.
func repoPath(t *testing.T) *regexp.Regexp {
	t.Helper()
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			continue // .cache, .devcluster: made by commands, not in the repository
		}
		name := regexp.QuoteMeta(e.Name())
		if e.IsDir() {
			name += "/"
		}
		names = append(names, name)
	}
	sort.Sort(sort.Reverse(sort.StringSlice(names)))
	return regexp.MustCompile(`(?:^|[\s'"=(])(?:\./)?((?:` + strings.Join(names, "|") + `)[^\s'"():,;\x60]*)`)
}

var chdir = regexp.MustCompile(`\s-C\s+([^\s'"]+)`)

func existsIn(bases []string, p string) bool {
	for _, b := range bases {
		if _, err := os.Stat(filepath.Join(b, p)); err == nil {
			return true
		}
	}
	return false
}

// shellLangs are the fenced blocks that hold commands.
var shellLangs = map[string]bool{"": true, "sh": true, "bash": true, "shell": true, "console": true}

// Every path of the repository a command block names exists.
func TestCommandBlockPathsExist(t *testing.T) {
	re := repoPath(t)
	checked := 0
	for _, f := range docs(t) {
		for _, l := range readLines(t, f) {
			if !l.inBlock || !shellLangs[l.lang] {
				continue
			}
			// go -C DIR: the paths after it are DIR's.
			bases := []string{root}
			for _, m := range chdir.FindAllStringSubmatch(l.text, -1) {
				bases = append(bases, filepath.Join(root, m[1]))
			}
			for _, m := range re.FindAllStringSubmatch(l.text, -1) {
				p := strings.TrimRight(m[1], ".\\")
				p = strings.TrimSuffix(p, "/...")
				if strings.ContainsAny(p, "*?$<>{}[]") {
					continue // a pattern or a placeholder
				}
				checked++
				if !existsIn(bases, p) {
					t.Errorf("%s: command names %s, which does not exist", l, p)
				}
			}
		}
	}
	if checked < 10 {
		t.Fatalf("only %d paths found in command blocks: is the pattern broken?", checked)
	}
}
