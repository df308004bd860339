package pipeline

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/tailplane/tailplane/handlers/lib/cluster"
	"github.com/tailplane/tailplane/handlers/lib/proxyset"
	"github.com/tailplane/tailplane/internal/proxystate"
)

// renameSettle is how long after a parent moved to other hostnames the
// parents waiting for its old ones are handled again.
const renameSettle = 2 * time.Second

// hostnameClaims records which parent uses which tailnet hostname in this
// process, and who waits for a taken one. Parents are keyed
// "role/namespace/name".
type hostnameClaims struct {
	mu      sync.Mutex
	owner   map[string]string   // hostname -> parent
	held    map[string][]string // parent -> hostnames
	waiters map[string][]string // hostname -> parents refused it
	// wake has the runtime handle a parent again after a delay.
	wake func(parent string, after time.Duration)
}

func claimKey(p proxyset.Parent) string { return p.Role + "/" + p.Namespace + "/" + p.Name }

// claim claims hostnames for parent. It fails, naming the other parent,
// when another parent's proxy already uses one (a config Secret carries it
// in cluster.LabelHostname) or claimed it in this process and has not applied it
// yet. A parent's newer claim replaces its older one; release frees it.
func (c *hostnameClaims) claim(ctx context.Context, d *cluster.Deps, parent proxyset.Parent, hostnames []string, describe func(role, ns, name string) string) error {
	me := claimKey(parent)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.owner == nil {
		c.owner, c.held, c.waiters = map[string]string{}, map[string][]string{}, map[string][]string{}
	}
	mine := parent.Labels()
	for _, h := range hostnames {
		if other, ok := c.owner[h]; ok && other != me {
			c.waitFor(h, me)
			role, ns, name := splitKey(other)
			return fmt.Errorf("hostname %q is already used by %s", h, describe(role, ns, name))
		}
		sel := labels.SelectorFromSet(labels.Set{proxystate.LabelManaged: "true", cluster.LabelHostname: h}).String()
		list, err := d.Kube.CoreV1().Secrets(d.Settings.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
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
			c.waitFor(h, me)
			return fmt.Errorf("hostname %q is already used by %s", h,
				describe(l[proxyset.LabelProxyRole], l[proxystate.LabelParentNamespace], l[proxystate.LabelParentName]))
		}
	}
	for _, old := range c.held[me] {
		if !slices.Contains(hostnames, old) {
			delete(c.owner, old)
			// The old name is free once this parent's config Secrets
			// carry the new ones: wake its waiters a little later.
			c.wakeWaiters(old, renameSettle)
		}
	}
	for _, h := range hostnames {
		c.owner[h] = me
	}
	c.held[me] = slices.Clone(hostnames)
	return nil
}

// release frees the hostnames of parent, whose proxy is gone.
func (c *hostnameClaims) release(parent proxyset.Parent) {
	me := claimKey(parent)
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
func (c *hostnameClaims) waitFor(hostname, parent string) {
	if !slices.Contains(c.waiters[hostname], parent) {
		c.waiters[hostname] = append(c.waiters[hostname], parent)
	}
}

// wakeWaiters handles again, after delay, the parents waiting for hostname
// (mu held).
func (c *hostnameClaims) wakeWaiters(hostname string, delay time.Duration) {
	for _, p := range c.waiters[hostname] {
		c.wake(p, delay)
	}
	delete(c.waiters, hostname)
}

func splitKey(key string) (role, namespace, name string) {
	parts := append(strings.SplitN(key, "/", 3), "", "")
	return parts[0], parts[1], parts[2]
}
