package cache

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"strings"
	"time"
)

// A Script is a Lua script run on the Redis server ([Redis.Eval]):
// the gateway's fleet-wide state (rate counters, provider state between
// turns) is kept with them, each change atomic on the server.
type Script struct {
	src, sha string
}

// NewScript returns the script with source src.
func NewScript(src string) *Script {
	h := sha1.Sum([]byte(src))
	return &Script{src: src, sha: hex.EncodeToString(h[:])}
}

// ErrRedisReply is wrapped by the error of a command Redis answered with an
// error reply (a script that failed, say): Redis is reachable.
var ErrRedisReply = errors.New("redis: error reply")

// Eval runs s with keys and args (strings, []byte, int or int64) by its
// SHA-1 (EVALSHA), loading it with EVAL when the server does not know it
// yet. The reply is a string, an int64, a []any (nil elements for nil
// replies) or nil. Like every command of r, it is skipped while Redis is
// after a failure ([ErrRedisSkipped]) and a command that gets no answer
// starts the cool-down; an error reply wraps [ErrRedisReply].
func (r *Redis) Eval(ctx context.Context, s *Script, keys []string, args ...any) (any, error) {
	cmd := make([]any, 0, 3+len(keys)+len(args))
	cmd = append(cmd, "EVALSHA", s.sha, len(keys))
	for _, k := range keys {
		cmd = append(cmd, k)
	}
	cmd = append(cmd, args...)
	reply, err := r.do(ctx, cmd...)
	var re redisError
	if errors.As(err, &re) && strings.HasPrefix(string(re), "NOSCRIPT") {
		cmd[0], cmd[1] = "EVAL", s.src
		reply, err = r.do(ctx, cmd...)
	}
	switch {
	case errors.Is(err, errNil):
		return nil, nil
	case errors.As(err, &re):
		return nil, errors.Join(ErrRedisReply, err)
	}
	return reply, err
}

// Ping asks Redis for a PONG within timeout, past the cool-down: it is
// the readiness probe's question, whether Redis answers now. An answer
// ends a cool-down at once.
func (r *Redis) Ping(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	_, err := r.c.do(ctx, "PING")
	if err == nil {
		r.brk.mu.Lock()
		wasOpen := !r.brk.until.IsZero() && !r.brk.probing
		r.brk.mu.Unlock()
		if wasOpen {
			r.brk.done(nil, r.addr)
		}
	}
	return err
}
