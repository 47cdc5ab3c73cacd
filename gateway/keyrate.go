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
// request is counted when it is admitted. Its tokens are counted at once
// as its estimate (the prompt's bound and the output limit), reserved
// while it is in flight, so that concurrent calls see each other; when
// the answer says how many it used, the reservation gives way to that
// figure. A call admitted under the token limit may take the key above
// it, and the key's next calls wait until the minute has room again.
type keyRates struct {
	now func() time.Time
	mu  sync.Mutex
	by  map[string]*keyWindow
	// held are the reservations of the calls in flight, by invocation id.
	held map[string]held
}

type keyWindow struct {
	requests []time.Time // admitted, oldest first
	tokens   []spent     // used, oldest first
	total    int64       // the sum of tokens
	reserved int64       // the estimates of the key's calls in flight
}

type spent struct {
	at time.Time
	n  int64
}

// held is the token reservation of a call in flight.
type held struct {
	key string
	n   int64
}

func newKeyRates(now func() time.Time) *keyRates {
	return &keyRates{now: now, by: map[string]*keyWindow{}, held: map[string]held{}}
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

// admit counts a request of key k, the call inv, or refuses it with a 429
// saying which limit and when the minute has room again. With a token
// limit, the call's estimate (from estimate) is reserved until [settle].
func (r *keyRates) admit(k *Key, inv string, estimate func() int64) *failure {
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
	if k.TPM > 0 && w.total+w.reserved >= k.TPM {
		// Room comes when enough of the oldest tokens leave the window, or,
		// when the calls in flight hold the rest, as they end.
		left, wait := w.total+w.reserved, time.Second
		for _, s := range w.tokens {
			left -= s.n
			if left < k.TPM {
				wait = s.at.Add(rateWindow).Sub(now)
				break
			}
		}
		f := fail(classRateLimit, "this API key's limit of %d tokens per minute is reached (its tpm; 'cortexbuild serve keys update %s --tpm N' changes it): %d used in the last minute and %d reserved by its calls in flight; retry in %s", k.TPM, k.ID, w.total, w.reserved, roundUp(wait))
		f.typ, f.retryAfter = "tokens", wait
		return f
	}
	w.requests = append(w.requests, now)
	if k.TPM > 0 {
		n := max(estimate(), 1)
		w.reserved += n
		r.held[inv] = held{key: k.ID, n: n}
	}
	return nil
}

// settle ends the reservation of call inv of key id, counting u's tokens
// (input and output) in its place; the reservation itself when used is
// false (an answer that never said). Later calls for inv count nothing.
func (r *keyRates) settle(id, inv string, u provider.Usage, used bool) {
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	h, reserved := r.held[inv]
	if reserved {
		delete(r.held, inv)
	}
	w := r.by[id]
	if id == "" || w == nil {
		return // the key has no rate limits
	}
	n := u.InputTokens + u.OutputTokens
	if reserved {
		w.reserved -= h.n
		if !used {
			n = h.n
		}
	} else if !used {
		return
	}
	w.drop(now)
	if n > 0 {
		w.tokens = append(w.tokens, spent{at: now, n: n})
		w.total += n
	}
}

// roundUp writes d rounded up to the second, at least 1s.
func roundUp(d time.Duration) time.Duration {
	return max(time.Second, (d+time.Second-1)/time.Second*time.Second)
}
