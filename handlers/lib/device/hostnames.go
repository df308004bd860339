package device

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"

	"github.com/tailplane/tailplane/handlers/lib/proxyset"
	"github.com/tailplane/tailplane/internal/proxystate"
)

// LabelHostname is put on config Secrets so that a tailnet hostname already
// used by another parent's replica is found (Claims).
const LabelHostname = "tailplane.dev/hostname"

// RenameSettle is how long after a parent moved to other hostnames the
// parents waiting for its old ones are woken.
const RenameSettle = 2 * time.Second

// Claims records which parent uses which tailnet hostname in this process,
// and who waits for a taken one. Its zero value with Kube, Namespace and
// Wake set is ready to use.
type Claims struct {
	// Kube and Namespace are where the config Secrets live.
	Kube      kubernetes.Interface
	Namespace string
	// Wake has a parent that was refused a hostname handled again after a
	// delay, once the name may be free.
	Wake func(parent proxyset.Key, after time.Duration)

	mu      sync.Mutex
	owner   map[string]proxyset.Key   // hostname -> parent
	held    map[proxyset.Key][]string // parent -> hostnames
	waiters map[string][]proxyset.Key // hostname -> parents refused it
}

// Claim claims hostnames for parent. It fails, naming the other parent
// with describe, when another parent's replica already uses one (a config
// Secret carries it in LabelHostname) or another parent claimed it in this
// process and has not applied it yet; the parent is then woken (Wake) when
// that one lets the name go. A parent's newer claim replaces its older one;
// Release frees it.
func (c *Claims) Claim(ctx context.Context, parent proxyset.Parent, hostnames []string, describe func(proxyset.Key) string) error {
	me := parent.Key()
	// The config Secrets are listed without the lock held, so that no
	// parent's claim waits for another's API calls; the claims of this
	// process are checked before (a cheap refusal) and again after, under
	// the lock that records the claim: a parent that claimed one of the
	// names meanwhile is seen then.
	if err := c.check(me, hostnames, describe); err != nil {
		return err
	}
	mine := parent.Labels()
	for _, h := range hostnames {
		sel := labels.SelectorFromSet(labels.Set{proxystate.LabelManaged: "true", LabelHostname: h}).String()
		list, err := c.Kube.CoreV1().Secrets(c.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			return fmt.Errorf("list config Secrets: %w", err)
		}
		for _, s := range list.Items {
			l := s.Labels
			sameParent := l[proxystate.LabelParentType] == mine[proxystate.LabelParentType] &&
				l[proxystate.LabelParentNamespace] == parent.Namespace && l[proxystate.LabelParentName] == mine[proxystate.LabelParentName]
			// Config Secrets of releases before roles on every object
			// have none: they are the parent's own.
			if sameParent && (l[proxyset.LabelProxyRole] == parent.Role || l[proxyset.LabelProxyRole] == "") {
				continue
			}
			c.mu.Lock()
			c.waitFor(h, me)
			c.mu.Unlock()
			return fmt.Errorf("hostname %q is already used by %s", h,
				describe(proxyset.Key{Role: l[proxyset.LabelProxyRole], Namespace: l[proxystate.LabelParentNamespace], Name: l[proxystate.LabelParentName]}))
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.checkLocked(me, hostnames, describe); err != nil {
		return err
	}
	for _, old := range c.held[me] {
		if !slices.Contains(hostnames, old) {
			delete(c.owner, old)
			// The old name is free once this parent's config Secrets
			// carry the new ones: wake its waiters a little later.
			c.wakeWaiters(old, RenameSettle)
		}
	}
	for _, h := range hostnames {
		c.owner[h] = me
	}
	c.held[me] = slices.Clone(hostnames)
	return nil
}

func (c *Claims) check(me proxyset.Key, hostnames []string, describe func(proxyset.Key) string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.checkLocked(me, hostnames, describe)
}

// checkLocked refuses a hostname another parent claimed in this process
// (mu held).
func (c *Claims) checkLocked(me proxyset.Key, hostnames []string, describe func(proxyset.Key) string) error {
	if c.owner == nil {
		c.owner, c.held, c.waiters = map[string]proxyset.Key{}, map[proxyset.Key][]string{}, map[string][]proxyset.Key{}
	}
	for _, h := range hostnames {
		if other, ok := c.owner[h]; ok && other != me {
			c.waitFor(h, me)
			return fmt.Errorf("hostname %q is already used by %s", h, describe(other))
		}
	}
	return nil
}

// Release frees the hostnames of parent, whose replicas are gone, and wakes
// the parents waiting for them.
func (c *Claims) Release(parent proxyset.Parent) {
	me := parent.Key()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, h := range c.held[me] {
		if c.owner[h] == me {
			delete(c.owner, h)
		}
		c.wakeWaiters(h, 0)
	}
	delete(c.held, me)
}

// waitFor records that parent waits for hostname (mu held).
func (c *Claims) waitFor(hostname string, parent proxyset.Key) {
	if c.waiters == nil {
		c.owner, c.held, c.waiters = map[string]proxyset.Key{}, map[proxyset.Key][]string{}, map[string][]proxyset.Key{}
	}
	if !slices.Contains(c.waiters[hostname], parent) {
		c.waiters[hostname] = append(c.waiters[hostname], parent)
	}
}

// wakeWaiters wakes, after delay, the parents waiting for hostname (mu
// held).
func (c *Claims) wakeWaiters(hostname string, delay time.Duration) {
	for _, p := range c.waiters[hostname] {
		c.Wake(p, delay)
	}
	delete(c.waiters, hostname)
}
