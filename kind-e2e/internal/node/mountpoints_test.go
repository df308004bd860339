package node

import (
	"os"
	"path/filepath"
	"testing"
)

func TestMountpointsAreRemovedWhenUnused(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "run"), 0o755); err != nil {
		t.Fatal(err)
	}
	m := newMountpoints(root)
	a, b := filepath.Join(root, "etc/x/a"), filepath.Join(root, "etc/x/b")
	file := filepath.Join(root, "etc/x/c/file.conf")
	for _, c := range []struct {
		p      string
		isFile bool
	}{{a, false}, {b, false}, {a, false}, {file, true}} {
		if err := m.claim(c.p, c.isFile); err != nil {
			t.Fatal(err)
		}
	}
	if st, err := os.Stat(file); err != nil || st.IsDir() {
		t.Fatalf("file mountpoint: %v", err)
	}
	m.release(a) // still used by the second claim
	if _, err := os.Stat(a); err != nil {
		t.Fatalf("%s removed while in use", a)
	}
	m.release(a)
	if _, err := os.Stat(a); !os.IsNotExist(err) {
		t.Fatalf("%s not removed when unused", a)
	}
	if _, err := os.Stat(filepath.Join(root, "etc")); err != nil {
		t.Fatal("etc removed while b and c use it")
	}
	m.release(file)
	m.release(b)
	if _, err := os.Stat(filepath.Join(root, "etc")); !os.IsNotExist(err) {
		t.Fatal("created folders left behind")
	}
}
