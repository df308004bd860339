package operator

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"
)

// load sends GETs to one URL at a constant rate, each in its own
// goroutine, and records when each one ended and whether it succeeded.
type load struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	results []result
}

type result struct {
	at  time.Time
	ok  bool
	why string // of a failure: the error, or the status code
}

// loadMark is a point in a load's record.
type loadMark struct {
	at     time.Time
	index  int
	served int64
}

func startLoad(ctx context.Context, c *tailnetClient, target string, perSecond int) *load {
	ctx, cancel := context.WithCancel(ctx)
	l := &load{cancel: cancel}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		tick := time.NewTicker(time.Second / time.Duration(perSecond))
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			l.wg.Add(1)
			go func() {
				defer l.wg.Done()
				rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				defer cancel()
				code, _, _, err := c.get(rctx, target, nil)
				if ctx.Err() != nil {
					return // stopped: not a failure of the target
				}
				why := ""
				switch {
				case err != nil:
					why = err.Error()
				case code != 200:
					why = fmt.Sprintf("status %d", code)
				}
				l.mu.Lock()
				l.results = append(l.results, result{at: time.Now(), ok: why == "", why: why})
				l.mu.Unlock()
			}()
		}
	}()
	return l
}

func (l *load) stop() { l.cancel(); l.wg.Wait() }

// served counts the successful requests so far.
func (l *load) served() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	var n int64
	for _, r := range l.results {
		if r.ok {
			n++
		}
	}
	return n
}

func (l *load) mark() loadMark {
	l.mu.Lock()
	n := len(l.results)
	l.mu.Unlock()
	return loadMark{at: time.Now(), index: n, served: l.served()}
}

// since returns, for the requests that ended after m, the longest time
// without a successful response (from m on), the failures and the total.
func (l *load) since(m loadMark) (gap time.Duration, failed, total int) {
	l.mu.Lock()
	rs := slices.Clone(l.results[m.index:])
	l.mu.Unlock()
	slices.SortFunc(rs, func(a, b result) int { return a.at.Compare(b.at) })
	last := m.at
	for _, r := range rs {
		total++
		if !r.ok {
			failed++
			continue
		}
		gap = max(gap, r.at.Sub(last))
		last = r.at
	}
	return gap, failed, total
}

// failures counts the failures that ended after m by what went wrong.
func (l *load) failures(m loadMark) map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]int{}
	for _, r := range l.results[m.index:] {
		if !r.ok {
			out[r.why]++
		}
	}
	return out
}

// percentile returns the p-th percentile of ds (nearest rank).
func percentile(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := (p*len(s)+99)/100 - 1
	return s[max(i, 0)]
}
