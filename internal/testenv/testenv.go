// Package testenv gives integration tests the addresses of the services
// they need (PostgreSQL, Redis) and decides what happens when one is
// missing: in CI (CI=true) the test fails, elsewhere it is skipped with a
// message naming the service and how to provide it.
package testenv

import (
	"context"
	"net"
	"net/url"
	"os"
	"testing"
	"time"
)

// Environment variables that name the services; unset means the local
// default.
const (
	PostgresEnv = "CORTEXBUILD_TEST_POSTGRES" // e.g. postgres://postgres@127.0.0.1:5432/test?sslmode=disable
	RedisEnv    = "CORTEXBUILD_TEST_REDIS"    // e.g. redis://127.0.0.1:6379/15
)

// Local defaults, on loopback only.
const (
	DefaultPostgres = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	DefaultRedis    = "redis://127.0.0.1:6379/15"
)

// InCI reports whether the tests run in CI, where a missing service is a
// failure rather than a skip.
func InCI() bool { return os.Getenv("CI") == "true" || os.Getenv("CI") == "1" }

// Postgres returns the PostgreSQL URL for tests, after checking that
// something listens there.
func Postgres(t testing.TB) string { return service(t, "PostgreSQL", PostgresEnv, DefaultPostgres) }

// Redis returns the Redis URL for tests, after checking that something
// listens there.
func Redis(t testing.TB) string { return service(t, "Redis", RedisEnv, DefaultRedis) }

func service(t testing.TB, name, env, def string) string {
	t.Helper()
	raw := os.Getenv(env)
	if raw == "" {
		raw = def
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		t.Fatalf("%s=%q is not a URL with a host", env, raw)
	}
	host := u.Host
	if u.Port() == "" {
		switch u.Scheme {
		case "redis":
			host = net.JoinHostPort(u.Hostname(), "6379")
		default:
			host = net.JoinHostPort(u.Hostname(), "5432")
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", host)
	if err != nil {
		msg := name + " is not reachable at " + host + " (" + err.Error() + "); set " + env + " to its URL or start it (see .ci/run)"
		if InCI() {
			t.Fatal(msg)
		}
		t.Skip("skipped: " + msg)
	}
	conn.Close()
	return raw
}
