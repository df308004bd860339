package freeport

import "testing"

func TestOnGivesDistinctPorts(t *testing.T) {
	ports, err := On("127.0.0.1", 5)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, p := range ports {
		if p <= 0 || seen[p] {
			t.Fatalf("ports %v: want 5 distinct ports", ports)
		}
		seen[p] = true
	}
}
