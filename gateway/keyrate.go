package gateway

import (
	"sync"
	"time"

	"github.com/cortexbuild/cortexbuild/provider"
)

// rateWindow is the span a key's requests and tokens per minute are
// counted over.
const rateWindow = time.Minute

// keyRates enforces the requests and tokens per minute of each key (its
// RPM and TPM), in this process: a sliding window of the last minute. A
// request is counted when it is admitted; its tokens when its answer says
// how many it used, so a call admitted under the token limit may take the
// key above it, and the key's next calls wait until the minute has
// room again.
type keyRates struct {
	now func() time.Time
	mu  sync.Mutex
	by  map[string]*keyWindow
}

type keyWindow struct {
	requests []time.Time // admitted, oldest first
	tokens   []spent     // used, oldest first
	total    int64       // the sum of tokens
}

type spent struct {
	at time.Time
	n  int64
}

func newKeyRates(now func() time.Time) *keyRates {
	return &keyRates{now: now, by: map[string]*keyWindow{}}
}

// drop forgets what is older than the window at now.
func (w *keyWindow) drop(now time.Time) {
	from := now.Add(-rateWindow)
	i := 0
	for i < len(w.requests) && !w.requests[i].After(from) {
		i++
	}
	w.requests = w.requests[i:]
	j := 0
	for j < len(w.tokens) && !w.tokens[j].at.After(from) {
		w.total -= w.tokens[j].n
		j++
	}
	w.tokens = w.tokens[j:]
}

// admit counts a request of key k, or refuses it with a 429 saying which
// limit and when the minute has room again.
func (r *keyRates) admit(k *Key) *failure {
	if k == nil || (k.RPM <= 0 && k.TPM <= 0) {
		return nil
	}
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	w := r.by[k.ID]
	if w == nil {
		w = &keyWindow{}
		r.by[k.ID] = w
	}
	w.drop(now)
	if k.RPM > 0 && len(w.requests) >= k.RPM {
		// Room comes when enough of the oldest requests leave the window.
		wait := w.requests[len(w.requests)-k.RPM].Add(rateWindow).Sub(now)
		f := fail(classRateLimit, "this API key's limit of %d requests per minute is reached (its rpm; 'cortexbuild serve keys update %s --rpm N' changes it): retry in %s", k.RPM, k.ID, roundUp(wait))
		f.typ, f.retryAfter = "requests", wait
		return f
	}
	if k.TPM > 0 && w.total >= k.TPM {
		left, wait := w.total, time.Duration(0)
		for _, s := range w.tokens {
			left -= s.n
			if left < k.TPM {
				wait = s.at.Add(rateWindow).Sub(now)
				break
			}
		}
		f := fail(classRateLimit, "this API key's limit of %d tokens per minute is reached (its tpm; 'cortexbuild serve keys update %s --tpm N' changes it): %d used in the last minute; retry in %s", k.TPM, k.ID, w.total, roundUp(wait))
		f.typ, f.retryAfter = "tokens", wait
		return f
	}
	w.requests = append(w.requests, now)
	return nil
}

// used counts the tokens of an answer to key id (input and output).
func (r *keyRates) used(id string, u provider.Usage) {
	n := u.InputTokens + u.OutputTokens
	if id == "" || n <= 0 {
		return
	}
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	w := r.by[id]
	if w == nil {
		return // the key has no rate limits
	}
	w.drop(now)
	w.tokens = append(w.tokens, spent{at: now, n: n})
	w.total += n
}

// roundUp writes d rounded up to the second, at least 1s.
func roundUp(d time.Duration) time.Duration {
	return max(time.Second, (d+time.Second-1)/time.Second*time.Second)
}
