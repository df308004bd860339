package tailnet

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"tailscale.com/tailcfg"
	"tailscale.com/types/key"
)

// firstAskAgain is how long control waits for a node's answer to c2n GET
// /vip-services before it asks again; the wait doubles with every
// unanswered question up to lastAskAgain, kept short because an unanswered
// question is usually a lost one (a node that gets it answers within
// milliseconds), and a host that control does not know about is a
// failover target missing. A c2n request rides on a map
// response, and testcontrol may put it in a non-streaming one (whose body
// the node discards) or in the map poll of a process that just went away:
// such a question is never answered.
const (
	firstAskAgain = time.Second
	lastAskAgain  = 2 * time.Second
)

// streamStarted and streamEnded count a node's open map polls: a node is
// online while it has one, and only online hosts are routed to. Every new
// poll makes control ask the node again what it serves, even when the
// node's previous poll has not ended yet (a restarted process may open its
// poll before control sees the old one close): what control holds may be
// the answer of the process before.
func (t *Tailnet) streamStarted(k key.NodePublic) {
	t.routeMu.Lock()
	v := &t.routes.vip
	v.online[k]++
	v.polls[k]++
	first := v.online[k] == 1
	t.routeMu.Unlock()
	if first {
		t.syncAll()
		t.appDNSChanged()
	}
	if n := t.Control.Node(k); n != nil {
		t.maybeFetchServices(n)
	}
}

func (t *Tailnet) streamEnded(k key.NodePublic) {
	t.routeMu.Lock()
	t.routes.vip.online[k]--
	last := t.routes.vip.online[k] <= 0
	if last {
		delete(t.routes.vip.online, k)
	}
	t.routeMu.Unlock()
	if last {
		t.syncAll()
		t.appDNSChanged()
	}
}

// servicesHash is n's Hostinfo.ServicesHash ("" when it serves nothing).
func servicesHash(n *tailcfg.Node) string {
	if n == nil || !n.Hostinfo.Valid() {
		return ""
	}
	return n.Hostinfo.ServicesHash()
}

// knowsLocked reports whether control holds node k's answer for hash,
// asked on the node's current map poll.
func (t *Tailnet) knowsLocked(k key.NodePublic, hash string) bool {
	v := &t.routes.vip
	r := v.reported[k]
	return r.hash == hash && r.poll == v.polls[k]
}

// maybeFetchServices makes control ask node n what it serves, as
// Tailscale's control server does when the node's Hostinfo.ServicesHash
// changes (it changes whenever the node's advertised services or serve
// config do), unless control already holds the answer for that hash from
// the node's current map poll. One fetchServices loop per node does the
// asking; this starts it or wakes it.
func (t *Tailnet) maybeFetchServices(n *tailcfg.Node) {
	hash := servicesHash(n)
	t.routeMu.Lock()
	v := &t.routes.vip
	if hash == "" {
		// A node that serves nothing has nothing to be asked.
		prev := v.reported[n.Key]
		cleared := prev.hash != ""
		if cleared {
			v.reported[n.Key] = reported{poll: v.polls[n.Key], disco: prev.disco}
		}
		t.routeMu.Unlock()
		if cleared {
			t.logger.Info("device serves no Tailscale Service", "device", n.Name)
			t.syncAll()
		}
		return
	}
	var start chan struct{}
	if !t.knowsLocked(n.Key, hash) {
		if wake, ok := v.fetchers[n.Key]; ok {
			select {
			case wake <- struct{}{}:
			default: // already woken
			}
		} else if v.online[n.Key] > 0 {
			// Without an open map poll a question would go out in the
			// next map response, maybe a non-streaming one whose body
			// the node discards; the next poll starts the loop instead.
			start = make(chan struct{}, 1)
			v.fetchers[n.Key] = start
		}
	}
	t.routeMu.Unlock()
	if start != nil {
		go t.fetchServices(t.ctx, n.Key, start)
	}
}

// c2nAnswer is a node's answer to c2n GET /vip-services.
type c2nAnswer struct {
	poll uint64 // the node's map poll when it was asked
	res  *tailcfg.C2NVIPServicesResponse
	err  error
}

// fetchServices asks node k what it serves until control holds the answer
// for the node's current hash and map poll, the node goes offline (its
// next poll starts a new loop), or it is deleted. It asks again every
// firstAskAgain (backing off), at once when the hash or the poll changes, and takes an answer
// to any of its questions, late ones included, that matches the node's
// hash when it arrives.
func (t *Tailnet) fetchServices(ctx context.Context, k key.NodePublic, wake chan struct{}) {
	answers := make(chan c2nAnswer, 16)
	var (
		askedAt   time.Time
		askedHash string
		askedPoll uint64
		again     = firstAskAgain
	)
	for {
		n := t.Control.Node(k)
		hash := servicesHash(n)
		t.routeMu.Lock()
		v := &t.routes.vip
		poll := v.polls[k]
		done := ctx.Err() != nil || n == nil || hash == "" || v.online[k] == 0 || t.devices.removed(k) || t.knowsLocked(k, hash)
		if done {
			select {
			case <-wake:
				// Something changed after n was read: look again.
				t.routeMu.Unlock()
				continue
			default:
				// maybeFetchServices starts a new loop from here on.
				delete(v.fetchers, k)
			}
		}
		t.routeMu.Unlock()
		if done {
			return
		}
		ask := false
		switch {
		case hash != askedHash || poll != askedPoll:
			again, ask = firstAskAgain, true
		case time.Since(askedAt) >= again:
			again, ask = min(2*again, lastAskAgain), true
		}
		if ask {
			if err := t.askServices(ctx, k, poll, answers); err != nil {
				t.logger.Debug("c2n GET /vip-services not sent", "device", n.Name, "err", err)
			}
			askedAt, askedHash, askedPoll = time.Now(), hash, poll
		}
		select {
		case <-ctx.Done():
		case <-wake:
		case <-time.After(time.Until(askedAt.Add(again))):
		case a := <-answers:
			t.takeAnswer(k, a)
		}
	}
}

// takeAnswer records node k's answer if it is for the node's current hash.
func (t *Tailnet) takeAnswer(k key.NodePublic, a c2nAnswer) {
	n := t.Control.Node(k)
	if n == nil {
		return
	}
	if a.err != nil {
		t.logger.Debug("c2n GET /vip-services failed", "device", n.Name, "err", a.err)
		return
	}
	hash := a.res.ServicesHash
	if hash != servicesHash(n) {
		t.logger.Debug("c2n GET /vip-services: answer for another hash than the current one", "device", n.Name)
		return
	}
	t.routeMu.Lock()
	v := &t.routes.vip
	prev := v.reported[k]
	if prev.hash == hash && prev.poll >= a.poll {
		t.routeMu.Unlock()
		return // nothing new
	}
	v.reported[k] = reported{hash: hash, poll: a.poll, disco: n.DiscoKey, services: a.res.VIPServices}
	t.routeMu.Unlock()
	var names []string
	for _, s := range a.res.VIPServices {
		names = append(names, fmt.Sprintf("%s(active=%v)", s.Name, s.Active))
	}
	switch {
	case !prev.disco.IsZero() && prev.disco != n.DiscoKey:
		t.logger.Info("restarted device serves Tailscale Services", "device", n.Name, "services", names)
	case prev.hash != hash:
		t.logger.Info("device serves Tailscale Services", "device", n.Name, "services", names)
	default:
		t.logger.Debug("reconnected device serves the same Tailscale Services", "device", n.Name, "services", names)
	}
	if prev.hash != hash {
		t.syncAll()
	}
}

// askServices sends c2n GET /vip-services to node k; its answer goes to
// answers (dropped if answers is full, or ctx is done by then). The
// answer's body is read in testcontrol's callback, before the node's
// request that carries it ends.
func (t *Tailnet) askServices(ctx context.Context, k key.NodePublic, poll uint64, answers chan<- c2nAnswer) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://node/vip-services", nil)
	if err != nil {
		return err
	}
	err = t.Control.SendC2N(k, req, func(r *http.Response) {
		a := c2nAnswer{poll: poll}
		b, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		switch {
		case err != nil:
			a.err = fmt.Errorf("c2n GET /vip-services answer: %w", err)
		case r.StatusCode != http.StatusOK:
			a.err = fmt.Errorf("c2n GET /vip-services: %d %s", r.StatusCode, b)
		default:
			a.res = new(tailcfg.C2NVIPServicesResponse)
			if err := json.Unmarshal(b, a.res); err != nil {
				a.err = fmt.Errorf("c2n GET /vip-services answer: %w", err)
			}
		}
		select {
		case answers <- a:
		default:
		}
	})
	if err != nil {
		return fmt.Errorf("c2n GET /vip-services: %w", err)
	}
	return nil
}
