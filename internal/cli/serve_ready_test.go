package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/cortexbuild/cortexbuild/internal/testenv"
	"github.com/cortexbuild/cortexbuild/provider/anthropic/anthropicfake"
)

// getReady GETs base/readyz and decodes it.
func getReady(t *testing.T, base string) (int, map[string]any) {
	t.Helper()
	resp, err := http.Get(base + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, body
}

// serve on PostgreSQL and Redis checks both in /readyz (PostgreSQL
// required, Redis not) and counts a key's rpm in Redis, under the
// project's keys; on the single-machine defaults /readyz checks nothing
// and answers ready.
func TestServeReadyzAndSharedRates(t *testing.T) {
	t.Run("defaults", func(t *testing.T) {
		dir, _ := fakeProject(t, true)
		base, stop := startServe(t, dir, keyEnv)
		defer stop()
		if st, body := getReady(t, base); st != 200 || body["status"] != "ready" || fmt.Sprint(body["engines"]) != "[]" {
			t.Errorf("/readyz %d %v; want ready, no engine", st, body)
		}
	})
	t.Run("fleet", func(t *testing.T) {
		dsn := freshPostgresDB(t, testenv.Postgres(t), "ready_")
		redisURL := testenv.Redis(t)
		b := make([]byte, 6)
		rand.Read(b)
		project := "ready-" + hex.EncodeToString(b)
		opt, err := redis.ParseURL(redisURL)
		if err != nil {
			t.Fatal(err)
		}
		inspect := redis.NewClient(opt)
		prefix := "cortexbuild:gateway:v1:{" + project + "}:"
		t.Cleanup(func() {
			ctx := context.Background()
			iter := inspect.Scan(ctx, 0, prefix+"*", 100).Iterator()
			for iter.Next(ctx) {
				inspect.Del(ctx, iter.Val())
			}
			inspect.Close()
		})
		srv := anthropicfake.New(anthropicfake.WithAPIKey(testKey))
		t.Cleanup(srv.Close)
		cfg := strings.Replace(deploymentConfig(srv.URL(), "project: "+project+"\n"), "cache:\n  backend: off\n", "cache:\n  backend: redis\n  url: ${REDIS}\n", 1)
		dir := writeConfig(t, cfg)
		vars := map[string]string{"MY_KEY": testKey, "PGDSN": dsn, "REDIS": redisURL}
		code, out, errs := run(t, dir, vars, "serve", "keys", "create", "--name", "ci", "--rpm", "1", "--json")
		var k struct {
			ID    string `json:"id"`
			Token string `json:"key"`
		}
		if code != 0 || json.Unmarshal([]byte(out), &k) != nil {
			t.Fatalf("keys create = %d %s %s", code, out, errs)
		}
		base, stop := startServe(t, dir, vars)
		defer stop()
		st, body := getReady(t, base)
		engines, _ := json.Marshal(body["engines"])
		if st != 200 || body["status"] != "ready" ||
			string(engines) != `[{"name":"postgres","required":true,"status":"up"},{"name":"redis","required":false,"status":"up"}]` {
			t.Errorf("/readyz %d %v %s; want ready, postgres required and redis not, both up", st, body, engines)
		}
		if strings.Contains(fmt.Sprint(body), dsn) || strings.Contains(fmt.Sprint(body), "127.0.0.1") {
			t.Errorf("/readyz tells an address: %v", body)
		}
		srv.Enqueue(anthropicfake.TextReply("hi"))
		req, _ := http.NewRequest(http.MethodPost, base+"/v1/messages", strings.NewReader(`{"model":"claude/claude-sonnet-4-6","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`))
		req.Header.Set("x-api-key", k.Token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.Header.Get("X-CortexBuild-Degraded") != "" {
			t.Fatalf("a call: %d, degraded %q", resp.StatusCode, resp.Header.Get("X-CortexBuild-Degraded"))
		}
		if n, err := inspect.ZCard(context.Background(), prefix+"rate:"+k.ID+":req").Result(); err != nil || n != 1 {
			t.Errorf("the key's requests in Redis: %d, %v; want the call counted there", n, err)
		}
	})
}
