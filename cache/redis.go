package cache

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
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
}

// Redis is the shared back end: each entry is a JSON value under
// Prefix+<key hex>, written with SET … PX ttl so that Redis expires it. It
// is safe for concurrent use.
type Redis struct {
	c      *respClient
	prefix string
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
	r := &Redis{c: c, prefix: opts.Prefix}
	if r.prefix == "" {
		r.prefix = DefaultRedisPrefix
	}
	return r, nil
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
	reply, err := r.c.do(ctx, "GET", rk)
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
	if _, err := r.c.do(ctx, "SET", rk, b, "PX", ms); err != nil {
		return fmt.Errorf("cache: Redis SET %s: %w", rk, err)
	}
	return nil
}
