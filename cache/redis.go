package cache

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"sync"
	"time"
)

// DefaultRedisPrefix starts every key the [Redis] store writes. Its version
// is the entry format's: a new format gets a new prefix, so old values are
// never decoded with a new meaning.
const DefaultRedisPrefix = "cortexbuild:cache:v1:"

// redisFormat is the version written into every value and checked on read.
const redisFormat = 1

// RedisOptions configure [OpenRedis].
type RedisOptions struct {
	// Prefix starts every key; "" means DefaultRedisPrefix. Tests use a
	// random prefix under the default one.
	Prefix string
	// Dialer, when set, opens the connections (the locality gate's
	// ServiceDial); it is given the URL's host:port (or a unix socket's
	// path) and resolves the name itself. For rediss:// the TLS handshake
	// runs over its connections. nil: a net.Dialer dials.
	Dialer func(ctx context.Context, network, addr string) (net.Conn, error)
	// Cooldown is how long Redis is skipped after a command fails to get an
	// answer (a timeout, a refused or broken connection): meanwhile every
	// lookup is a miss and nothing is stored, without a connection
	// attempt. Default DefaultRedisCooldown.
	Cooldown time.Duration
	// Logger hears, once each time Redis starts being skipped, a warning
	// saying why and for how long, and when it answers again. Default
	// slog.Default().
	Logger *slog.Logger
	// Now is the clock of the cool-down. Default time.Now.
	Now func() time.Time
}

// DefaultRedisCooldown is how long Redis is skipped after a failure.
const DefaultRedisCooldown = 30 * time.Second

// ErrRedisSkipped is the error of a lookup or a write made while Redis is
// skipped after a failure ([RedisOptions.Cooldown]).
var ErrRedisSkipped = errors.New("cache: Redis is skipped after a failure")

// Redis is the shared back end: each entry is a JSON value under
// Prefix+<key hex>, written with SET … PX ttl so that Redis expires it. It
// is safe for concurrent use.
type Redis struct {
	c      *respClient
	prefix string
	addr   string
	brk    redisBreaker
}

// redisBreaker skips Redis for a cool-down after a command got no answer,
// so that a hung server costs one timeout per cool-down, not two per call.
// After the cool-down one command probes it; the others still skip it
// until that command has its answer.
type redisBreaker struct {
	cooldown time.Duration
	log      *slog.Logger
	now      func() time.Time

	mu      sync.Mutex
	until   time.Time // open until then; zero: closed
	probing bool
}

// allow reports whether a command may go to Redis now.
func (b *redisBreaker) allow() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.until.IsZero():
		return true
	case b.probing || b.now().Before(b.until):
		return false
	}
	b.probing = true
	return true
}

// done records how a command went: failed says it got no answer.
func (b *redisBreaker) done(failed error, addr string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	wasOpen := !b.until.IsZero()
	b.probing = false
	if failed == nil {
		if wasOpen {
			b.until = time.Time{}
			b.log.Info("cache: Redis answers again; the cache is back", "addr", addr)
		}
		return
	}
	b.until = b.now().Add(b.cooldown)
	if !wasOpen {
		b.log.Warn("cache: Redis did not answer; calls go to the providers uncached while it is skipped",
			"addr", addr, "skipped_for", b.cooldown.String(), "error", failed.Error())
	}
}

// OpenRedis connects to the Redis server at rawURL
// (redis://[user:password@]host[:port][/db], rediss:// for TLS) and checks
// that it answers. A malformed URL and an unreachable server are errors
// that say so; there is no silent fallback to another store. The error
// never repeats the password.
func OpenRedis(ctx context.Context, rawURL string, opts RedisOptions) (*Redis, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // url.Error repeats the URL, password included
		}
		return nil, fmt.Errorf("cache: bad Redis URL: %v", err)
	}
	shown := u.Redacted()
	cfg, err := parseRedisURL(rawURL)
	if err != nil {
		return nil, fmt.Errorf("cache: bad Redis URL %q: %v", shown, err)
	}
	c := newRESPClient(cfg, opts.Dialer)
	if _, err := c.do(ctx, "PING"); err != nil {
		c.close()
		return nil, fmt.Errorf("cache: Redis at %s (%s) is unreachable: %w", cfg.addr, shown, err)
	}
	r := &Redis{c: c, prefix: opts.Prefix, addr: cfg.addr, brk: redisBreaker{cooldown: opts.Cooldown, log: opts.Logger, now: opts.Now}}
	if r.prefix == "" {
		r.prefix = DefaultRedisPrefix
	}
	if r.brk.cooldown <= 0 {
		r.brk.cooldown = DefaultRedisCooldown
	}
	if r.brk.log == nil {
		r.brk.log = slog.Default()
	}
	if r.brk.now == nil {
		r.brk.now = time.Now
	}
	return r, nil
}

// do sends one command unless Redis is skipped after a failure. An answer,
// even an error reply, keeps it in use; no answer (a timeout, a refused or
// broken connection) skips it for the cool-down. The caller's own
// cancellation counts for neither.
func (r *Redis) do(ctx context.Context, args ...any) (any, error) {
	if !r.brk.allow() {
		return nil, ErrRedisSkipped
	}
	reply, err := r.c.do(ctx, args...)
	var re redisError
	switch {
	case err == nil || errors.Is(err, errNil) || errors.As(err, &re):
		r.brk.done(nil, r.addr)
	case ctx.Err() != nil:
		r.brk.mu.Lock()
		r.brk.probing = false
		r.brk.mu.Unlock()
	default:
		r.brk.done(err, r.addr)
	}
	return reply, err
}

// Close closes the connections.
func (r *Redis) Close() error { return r.c.close() }

// RedisKey returns the Redis key that holds the entry for k.
func (r *Redis) RedisKey(k Key) string { return r.prefix + k.String() }

// redisValue is the JSON stored in Redis: the entry, the format version and
// the key it belongs under, both checked on read.
type redisValue struct {
	Format int    `json:"v"`
	Key    string `json:"key"`
	Entry
}

// Get implements [Store]. A Redis failure, a value that does not decode, and
// a value written for another key or in another format are all misses with
// an error: never a hit.
func (r *Redis) Get(ctx context.Context, key Key) (Entry, bool, error) {
	rk := r.RedisKey(key)
	reply, err := r.do(ctx, "GET", rk)
	if errors.Is(err, errNil) {
		return Entry{}, false, nil
	}
	if err != nil {
		return Entry{}, false, fmt.Errorf("cache: Redis GET %s: %w", rk, err)
	}
	b, ok := reply.(string)
	if !ok {
		return Entry{}, false, fmt.Errorf("cache: Redis GET %s answered %T, not a string", rk, reply)
	}
	var v redisValue
	if err := json.Unmarshal([]byte(b), &v); err != nil {
		return Entry{}, false, fmt.Errorf("cache: Redis value at %s does not decode: %w", rk, err)
	}
	if v.Format != redisFormat || v.Key != key.String() {
		return Entry{}, false, fmt.Errorf("cache: Redis value at %s has format %d and key %q; want format %d and key %s", rk, v.Format, v.Key, redisFormat, key)
	}
	return v.Entry, true, nil
}

// Put implements [Store] with SET key value PX ttl (ttl rounded up to a
// millisecond).
func (r *Redis) Put(ctx context.Context, key Key, e Entry, ttl time.Duration) error {
	if ttl <= 0 {
		return errors.New("cache: the time to live must be positive")
	}
	b, err := json.Marshal(redisValue{Format: redisFormat, Key: key.String(), Entry: e})
	if err != nil {
		return fmt.Errorf("cache: encode entry: %w", err)
	}
	ms := int64((ttl + time.Millisecond - 1) / time.Millisecond)
	rk := r.RedisKey(key)
	if _, err := r.do(ctx, "SET", rk, b, "PX", ms); err != nil {
		return fmt.Errorf("cache: Redis SET %s: %w", rk, err)
	}
	return nil
}
