package cli

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"

	"github.com/cortexbuild/cortexbuild/provider/anthropic/anthropicfake"
)

func TestServeKeys(t *testing.T) {
	dir, _ := fakeProject(t, true)
	code, out, errs := run(t, dir, nil, "serve", "keys", "create", "--name", "claude-code", "--agent", "builder")
	token := strings.TrimSpace(out)
	if code != 0 || !strings.HasPrefix(token, "cbk_") || !strings.Contains(errs, "only time it is shown") || !strings.Contains(errs, "bound to agent builder") {
		t.Fatalf("create = %d %q %q", code, out, errs)
	}
	id := strings.Split(strings.TrimPrefix(token, "cbk_"), "_")[0]
	code, out, _ = run(t, dir, nil, "serve", "keys", "list")
	if code != 0 || strings.Contains(out, token) || strings.Contains(out, token[len(token)-10:]) || !strings.Contains(out, "cbk_"+id+"_…") || !strings.Contains(out, "claude-code") || !strings.Contains(out, "active") {
		t.Errorf("list = %d\n%s", code, out)
	}
	code, out, _ = run(t, dir, nil, "serve", "keys", "list", "--json")
	if code != 0 || strings.Contains(out, token[len(token)-10:]) || strings.Contains(out, "sha256") || !strings.Contains(out, `"agent": "builder"`) {
		t.Errorf("list --json = %d\n%s", code, out)
	}
	if code, out, _ := run(t, dir, nil, "serve", "keys", "revoke", id); code != 0 || !strings.Contains(out, "revoked cbk_"+id) {
		t.Errorf("revoke = %d %q", code, out)
	}
	if code, out, _ := run(t, dir, nil, "serve", "keys", "list"); code != 0 || !strings.Contains(out, "revoked 20") {
		t.Errorf("list after revoke = %d\n%s", code, out)
	}
	if code, _, errs := run(t, dir, nil, "serve", "keys", "revoke", "nope"); code != ExitUsage || !strings.Contains(errs, "no such key") {
		t.Errorf("revoke unknown = %d %q", code, errs)
	}
	if code, _, errs := run(t, dir, nil, "serve", "keys", "create", "--agent", "wizard"); code != ExitUsage || !strings.Contains(errs, "unknown agent") {
		t.Errorf("create for an unknown agent = %d %q", code, errs)
	}
}

// lineWaiter is a concurrency-safe writer that reports the first match of
// a pattern.
type lineWaiter struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	re    *regexp.Regexp
	found chan string
	once  sync.Once
}

func (l *lineWaiter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf.Write(p)
	if l.re != nil {
		if m := l.re.FindStringSubmatch(l.buf.String()); m != nil {
			l.once.Do(func() { l.found <- m[1] })
		}
	}
	return len(p), nil
}

func (l *lineWaiter) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// startServe runs 'cortexbuild serve' in-process and returns its base URL
// and a stop function (as SIGTERM would) that gives its exit code and
// standard error.
func startServe(t *testing.T, dir string, vars map[string]string, args ...string) (string, func() (int, string)) {
	t.Helper()
	return startServeWith(t, nil, dir, vars, args...)
}

func TestServeEndToEnd(t *testing.T) {
	dir, srv := fakeProject(t, true)
	_, out, _ := run(t, dir, nil, "serve", "keys", "create", "--name", "tests")
	key := strings.TrimSpace(out)
	base, stop := startServe(t, dir, keyEnv)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	srv.Enqueue(anthropicfake.TextReply("Hello through the gateway."))
	oc := openai.NewClient(ooption.WithBaseURL(base+"/v1/"), ooption.WithAPIKey(key), ooption.WithMaxRetries(0), ooption.WithHTTPClient(&http.Client{}))
	cc, err := oc.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "builder", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
	if err != nil || cc.Choices[0].Message.Content != "Hello through the gateway." {
		t.Fatalf("chat completion = %+v, %v", cc, err)
	}
	srv.Enqueue(anthropicfake.TextReply("And in Messages."))
	ac := anthropic.NewClient(aoption.WithoutEnvironmentDefaults(), aoption.WithBaseURL(base), aoption.WithAPIKey(key), aoption.WithMaxRetries(0), aoption.WithHTTPClient(&http.Client{}))
	msg, err := ac.Messages.New(ctx, anthropic.MessageNewParams{Model: "explore", MaxTokens: 64, Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}},
		aoption.WithHeader("X-CortexBuild-Task", "T-42"))
	if err != nil || msg.Content[0].Text != "And in Messages." || msg.Model != "claude-haiku-4-5" {
		t.Fatalf("message = %+v, %v", msg, err)
	}
	wrong := openai.NewClient(ooption.WithBaseURL(base+"/v1/"), ooption.WithAPIKey("cbk_wrong"), ooption.WithMaxRetries(0))
	_, err = wrong.Chat.Completions.New(ctx,
		openai.ChatCompletionNewParams{Model: "builder", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
	var oe *openai.Error
	if !errors.As(err, &oe) || oe.StatusCode != 401 {
		t.Errorf("wrong key = %v", err)
	}
	code, errs := stop()
	if code != 0 || !strings.Contains(errs, "gateway stopped") || strings.Contains(errs, key) || strings.Contains(errs, testKey) {
		t.Errorf("serve exited %d:\n%s", code, errs)
	}
	// By default only refusals and failures get a request line.
	if !regexp.MustCompile(`level=INFO msg=request method=POST path=/v1/chat/completions status=401`).MatchString(errs) || strings.Contains(errs, "status=200") {
		t.Errorf("request lines: want the 401 at info and no 200:\n%s", errs)
	}
	// The ledger recorded both calls, the second under its task.
	code, out, _ = run(t, dir, keyEnv, "spend", "--task", "T-42", "--json")
	if code != 0 || !strings.Contains(out, `"attempts": 1`) {
		t.Errorf("spend for the task = %d %s", code, out)
	}
}

func TestServeRefusals(t *testing.T) {
	dir, _ := fakeProject(t, true)
	code, _, errs := run(t, dir, keyEnv, "serve", "--no-auth", "--listen", "0.0.0.0:0")
	if code != ExitUsage || !strings.Contains(errs, "authentication can be turned off only on a loopback address") {
		t.Errorf("--no-auth on every interface = %d %q", code, errs)
	}
	rendered, _ := fakeProject(t, false)
	if code, _, errs := run(t, rendered, keyEnv, "serve"); code != ExitFailure || !strings.Contains(errs, "rendered mode") {
		t.Errorf("serve in rendered mode = %d %q", code, errs)
	}
	// Without auth on loopback it serves.
	base, stop := startServe(t, dir, keyEnv, "--no-auth")
	resp, err := http.Get(base + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("models without auth = %d", resp.StatusCode)
	}
	if code, errs := stop(); code != 0 {
		t.Errorf("stop = %d %s", code, errs)
	}
}

// With observability.logs set, the gateway's request lines follow its level
// and go where the invocation lines go (here a file): at debug, the
// answered requests too.
func TestServeRequestLinesFollowObservabilityLogs(t *testing.T) {
	dir, srv := fakeProject(t, true)
	cfg := filepath.Join(dir, ".cortexbuild", "llm-config.yaml")
	b, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg, append(b, "observability:\n  logs:\n    level: debug\n    format: json\n    file: logs/cortexbuild.jsonl\n"...), 0o600); err != nil {
		t.Fatal(err)
	}
	_, out, _ := run(t, dir, nil, "serve", "keys", "create", "--name", "tests")
	key := strings.TrimSpace(out)
	base, stop := startServe(t, dir, keyEnv)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	srv.Enqueue(anthropicfake.TextReply("logged"))
	oc := openai.NewClient(ooption.WithBaseURL(base+"/v1/"), ooption.WithAPIKey(key), ooption.WithMaxRetries(0), ooption.WithHTTPClient(&http.Client{}))
	if _, err := oc.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "builder", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}}); err != nil {
		t.Fatal(err)
	}
	if code, errs := stop(); code != 0 || strings.Contains(errs, "msg=request") {
		t.Errorf("serve exited %d, request lines on stderr:\n%s", code, errs)
	}
	logged, err := os.ReadFile(filepath.Join(dir, "logs", "cortexbuild.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`"level":"DEBUG","msg":"request","method":"POST","path":"/v1/chat/completions","status":200`).Match(logged) || strings.Contains(string(logged), key) {
		t.Errorf("the log file lacks the answered request's line (or holds the key):\n%s", logged)
	}
}
