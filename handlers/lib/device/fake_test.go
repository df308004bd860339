package device_test

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sync"

	"github.com/charmbracelet/log"

	"github.com/tailplane/tailplane/internal/tailnet"
)

// fakeTailnet is the key and device half of a tailnet API, in memory.
type fakeTailnet struct {
	tailnet.Backend // the rest panics: the layer must not call it

	mu      sync.Mutex
	keys    []tailnet.AuthKey
	minted  []tailnet.KeyRequest
	revoked []string
	deleted []string
}

func (f *fakeTailnet) MintAuthKey(_ context.Context, req tailnet.KeyRequest) (tailnet.AuthKey, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.minted = append(f.minted, req)
	k := tailnet.AuthKey{ID: fmt.Sprintf("k%d", len(f.keys)+1), Key: fmt.Sprintf("secret-%d", len(f.keys)+1), Description: req.Description}
	f.keys = append(f.keys, tailnet.AuthKey{ID: k.ID, Description: k.Description})
	return k, nil
}

func (f *fakeTailnet) ListAuthKeys(context.Context) ([]tailnet.AuthKey, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.keys), nil
}

func (f *fakeTailnet) RevokeAuthKey(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.revoked = append(f.revoked, id)
	for i := range f.keys {
		if f.keys[i].ID == id {
			f.keys[i].Invalid = true
		}
	}
	return nil
}

func (f *fakeTailnet) DeleteDevice(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.deleted = append(f.deleted, id)
	return nil
}

func quiet() *log.Logger { return log.New(io.Discard) }
