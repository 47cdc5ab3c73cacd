package cli

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/cortexbuild/cortexbuild/provider/anthropic/anthropicfake"
)

// hungRedis listens on loopback as a Redis that answers the connection's
// PING (HELLO refused: the client falls back to RESP2) and never answers
// another command.
func hungRedis(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hang := make(chan struct{})
	t.Cleanup(func() { close(hang); l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					cmd, err := readRESPCommand(r)
					if err != nil {
						return
					}
					switch strings.ToUpper(cmd) {
					case "HELLO":
						io.WriteString(c, "-ERR unknown command 'HELLO'\r\n")
					case "PING":
						io.WriteString(c, "+PONG\r\n")
					default:
						<-hang
						return
					}
				}
			}()
		}
	}()
	return l.Addr().String()
}

// readRESPCommand reads one RESP array of bulk strings and returns its
// first word.
func readRESPCommand(r *bufio.Reader) (string, error) {
	readLine := func(prefix string) (int, error) {
		line, err := r.ReadString('\n')
		if err != nil {
			return 0, err
		}
		return strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(line, prefix), "\r\n"))
	}
	n, err := readLine("*")
	if err != nil {
		return "", err
	}
	var first string
	for i := range n {
		size, err := readLine("$")
		if err != nil {
			return "", err
		}
		b := make([]byte, size+2)
		if _, err := io.ReadFull(r, b); err != nil {
			return "", err
		}
		if i == 0 {
			first = string(b[:size])
		}
	}
	return first, nil
}

// With observability.logs set, serve writes a dropped notification and
// the Redis cache's warning where its other log lines go, in their
// format (here JSON, in a file), not as text on standard error.
func TestServeDropAndCacheLinesFollowObservabilityLogs(t *testing.T) {
	dir, srv := fakeProject(t, true)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNotFound) }))
	t.Cleanup(hook.Close)
	const token = "hook-token-51c2"
	cfg := filepath.Join(dir, ".cortexbuild", "llm-config.yaml")
	b, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// A Redis cache is shared, so serve needs the project named.
	extra := "project: obs-logs\n" +
		"observability:\n  logs:\n    level: info\n    format: json\n    file: logs/cortexbuild.jsonl\n" +
		"notifications:\n  webhook_url: " + hook.URL + "/services/" + token + "\n" +
		"cache:\n  backend: redis\n  url: redis://" + hungRedis(t) + "/0?read_timeout=100ms\n"
	if err := os.WriteFile(cfg, append(b, extra...), 0o600); err != nil {
		t.Fatal(err)
	}
	_, out, _ := run(t, dir, nil, "serve", "keys", "create", "--name", "tests")
	key := strings.TrimSpace(out)
	base, stop := startServe(t, dir, keyEnv)
	// explore's answers are cached: the lookup waits out Redis's timeout;
	// the provider's 401 pauses the project, and the webhook refuses the
	// notification with a 404.
	srv.Enqueue(anthropicfake.AuthError())
	req, _ := http.NewRequest(http.MethodPost, base+"/v1/chat/completions", strings.NewReader(`{"model":"explore","messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	code, errs := stop()
	if code != 0 {
		t.Errorf("serve exited %d:\n%s", code, errs)
	}
	logged, err := os.ReadFile(filepath.Join(dir, "logs", "cortexbuild.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`"level":"WARN","msg":"notification dropped","event":"project_paused"`,
		`"level":"WARN","msg":"cache: Redis did not answer; calls go to the providers uncached while it is skipped"`,
	} {
		if !strings.Contains(string(logged), want) {
			t.Errorf("the log file lacks %s:\n%s", want, logged)
		}
	}
	for _, unwanted := range []string{"notification dropped", "Redis did not answer", token} {
		if strings.Contains(errs, unwanted) {
			t.Errorf("standard error holds %q:\n%s", unwanted, errs)
		}
	}
	if strings.Contains(string(logged), token) {
		t.Errorf("the log file holds the webhook's token:\n%s", logged)
	}
}
