package host

import (
	"sync"
	"time"

	"github.com/tetratelabs/wazero/sys"
)

// errDeadline is the error of a call the watchdog stopped; it reads
// "module closed with context deadline exceeded", like wazero's own.
var errDeadline = sys.NewExitError(sys.ExitCodeDeadlineExceeded)

// Deadline states of an instance (instance.deadline); a positive value is
// the end of the running call's deadline, in ns since the watchdog's epoch.
const (
	idle   = 0
	killed = -1
)

// watchdog enforces call deadlines for one plugin's instrumented instances
// (see instrument.go): one goroutine for the plugin, not one per call. A
// call stores its deadline in its instance and clears it when it returns,
// two atomic operations; the watchdog scans the live instances a few times
// per deadline and sets the stop global of any whose call overran.
type watchdog struct {
	epoch    time.Time
	interval time.Duration

	mu   sync.Mutex
	live map[*instance]struct{}

	quit chan struct{}
	done chan struct{}
}

// newWatchdog starts a watchdog that notices an overrun within about
// timeout/8 (at least 1 ms, at most 100 ms).
func newWatchdog(timeout time.Duration) *watchdog {
	w := &watchdog{
		epoch:    time.Now(),
		interval: min(max(timeout/8, time.Millisecond), 100*time.Millisecond),
		live:     map[*instance]struct{}{},
		quit:     make(chan struct{}),
		done:     make(chan struct{}),
	}
	go w.run()
	return w
}

func (w *watchdog) now() int64 { return int64(time.Since(w.epoch)) }

// add and remove track an instance from instantiation to close.
func (w *watchdog) add(in *instance) {
	w.mu.Lock()
	w.live[in] = struct{}{}
	w.mu.Unlock()
}

func (w *watchdog) remove(in *instance) {
	w.mu.Lock()
	delete(w.live, in)
	w.mu.Unlock()
}

// begin marks in as running a call that must end within timeout and
// returns the token to pass to end.
func (w *watchdog) begin(in *instance, timeout time.Duration) int64 {
	d := w.now() + int64(timeout)
	in.deadline.Store(d)
	return d
}

// end marks in idle again. It reports false if the watchdog stopped the
// call: the instance must then be discarded, even if the guest returned
// before it reached a loop check.
func (w *watchdog) end(in *instance, token int64) bool {
	return in.deadline.CompareAndSwap(token, idle)
}

func (w *watchdog) run() {
	defer close(w.done)
	t := time.NewTicker(w.interval)
	defer t.Stop()
	for {
		select {
		case <-w.quit:
			return
		case <-t.C:
			w.scan()
		}
	}
}

func (w *watchdog) scan() {
	now := w.now()
	w.mu.Lock()
	defer w.mu.Unlock()
	for in := range w.live {
		if d := in.deadline.Load(); d > idle && now > d && in.deadline.CompareAndSwap(d, killed) {
			// The guest traps at its next loop header. The global lives
			// in memory wazero allocated in Go, so writing it while the
			// guest runs, or after the instance closed, is safe.
			in.stop.Set(1)
		}
	}
}

// close stops the watchdog goroutine.
func (w *watchdog) close() {
	close(w.quit)
	<-w.done
}
