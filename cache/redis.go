package cache

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"time"

	"github.com/redis/go-redis/v9"
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
	// runs over its connections. nil: go-redis dials.
	Dialer func(ctx context.Context, network, addr string) (net.Conn, error)
}

// Redis is the shared back end: each entry is a JSON value under
// Prefix+<key hex>, written with SET … PX ttl so that Redis expires it. It
// is safe for concurrent use.
type Redis struct {
	c      *redis.Client
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
	opt, err := redis.ParseURL(rawURL)
	if err != nil {
		return nil, fmt.Errorf("cache: bad Redis URL %q: %v", shown, err)
	}
	if dial := opts.Dialer; dial != nil {
		tlsConf := opt.TLSConfig
		opt.Dialer = func(ctx context.Context, network, addr string) (net.Conn, error) {
			conn, err := dial(ctx, network, addr)
			if err != nil || tlsConf == nil {
				return conn, err
			}
			tc := tls.Client(conn, tlsConf.Clone())
			if err := tc.HandshakeContext(ctx); err != nil {
				conn.Close()
				return nil, err
			}
			return tc, nil
		}
	}
	c := redis.NewClient(opt)
	if err := c.Ping(ctx).Err(); err != nil {
		c.Close()
		return nil, fmt.Errorf("cache: Redis at %s (%s) is unreachable: %w", opt.Addr, shown, err)
	}
	r := &Redis{c: c, prefix: opts.Prefix}
	if r.prefix == "" {
		r.prefix = DefaultRedisPrefix
	}
	return r, nil
}

// Close closes the connections.
func (r *Redis) Close() error { return r.c.Close() }

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
	b, err := r.c.Get(ctx, rk).Bytes()
	if errors.Is(err, redis.Nil) {
		return Entry{}, false, nil
	}
	if err != nil {
		return Entry{}, false, fmt.Errorf("cache: Redis GET %s: %w", rk, err)
	}
	var v redisValue
	if err := json.Unmarshal(b, &v); err != nil {
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
	if err := r.c.Do(ctx, "SET", rk, b, "PX", ms).Err(); err != nil {
		return fmt.Errorf("cache: Redis SET %s: %w", rk, err)
	}
	return nil
}
