package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/toolrunner"

	"github.com/cortexbuild/cortexbuild/internal/testenv"
	"github.com/cortexbuild/cortexbuild/provider/anthropic/anthropicfake"
)

// A request with a message thread is refused with the error the official
// SDKs fall back on: a 400 invalid_request_error whose
// error.details.error_code is thread_unsupported_request, before anything
// reaches a provider.
func TestThreadIsRefusedAsUnsupported(t *testing.T) {
	w := newWorld(t, serveOn("claude"))
	resp, m := rawPost(t, w, w.key, "/v1/messages", `{"model":"claude-sonnet-4-6","max_tokens":50,"thread":{"type":"create"},"messages":[{"role":"user","content":"hi"}]}`)
	if resp.StatusCode != 400 || jsonString(m, "error", "type") != "invalid_request_error" || jsonString(m, "error", "details", "error_code") != "thread_unsupported_request" {
		t.Errorf("thread: %d %v", resp.StatusCode, m)
	}
	if !strings.Contains(jsonString(m, "error", "message"), "without thread") {
		t.Errorf("message = %q", jsonString(m, "error", "message"))
	}
	if n := len(w.anth.Requests()); n != 0 {
		t.Errorf("%d requests reached the provider", n)
	}
}

// toolRunnerTurns scripts the provider's side of a tool runner's loop: a
// call of get_weather, then an answer.
func toolRunnerTurns(w *world) {
	w.anth.Enqueue(
		anthropicfake.Reply{ToolUses: []anthropicfake.ToolUse{{ID: "toolu_01Weather", Name: "get_weather", Input: json.RawMessage(`{"city":"Paris"}`)}}},
		anthropicfake.TextReply("It is 18C and sunny in Paris."),
	)
}

// checkToolRunnerTurns checks that the provider got the loop's second turn
// whole: the call before its result (the fake refuses a result alone).
func checkToolRunnerTurns(t *testing.T, w *world) {
	t.Helper()
	reqs := w.anth.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d provider requests, want 2", len(reqs))
	}
	second := string(reqs[1].Body)
	call, result := strings.Index(second, `"tool_use"`), strings.Index(second, `"tool_result"`)
	if call < 0 || result < call || !strings.Contains(second, "18C and sunny in Paris") || !strings.Contains(second, "What is the weather in Paris?") {
		t.Errorf("second turn = %s", second)
	}
}

// The Go SDK's tool runner uses a message thread by default: refused, it
// sends every turn whole and finishes the loop.
func TestGoToolRunnerThroughTheGateway(t *testing.T) {
	w := newWorld(t, serveOn("claude"))
	toolRunnerTurns(w)
	type args struct {
		City string `json:"city"`
	}
	tool := toolrunner.NewBetaTool("get_weather", "The weather in a city",
		anthropic.BetaToolInputSchemaParam{Properties: map[string]any{"city": map[string]any{"type": "string"}}, Required: []string{"city"}},
		func(_ context.Context, a args) (anthropic.BetaToolResultBlockParamContentUnion, error) {
			return anthropic.BetaToolResultBlockParamContentUnion{OfText: &anthropic.BetaTextBlockParam{Text: "18C and sunny in " + a.City}}, nil
		})
	runner := w.anthropic(w.key).Beta.Messages.NewToolRunner([]anthropic.BetaTool{tool}, anthropic.BetaToolRunnerParams{
		BetaMessageNewParams: anthropic.BetaMessageNewParams{Model: "claude-sonnet-4-6", MaxTokens: 200,
			Messages: []anthropic.BetaMessageParam{anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock("What is the weather in Paris?"))}},
	})
	final, err := runner.RunToCompletion(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(final.Content) == 0 || final.Content[0].Text != "It is 18C and sunny in Paris." {
		t.Errorf("final message = %+v", final.Content)
	}
	checkToolRunnerTurns(t, w)
}

// nodeSDKs is where scripts/install-node-sdks.sh installed the Node SDKs
// (CORTEXBUILD_NODESDKS, else the repository's .cache/nodesdks), or ""
// when the Anthropic SDK is not there.
func nodeSDKs() string {
	d := os.Getenv("CORTEXBUILD_NODESDKS")
	if d == "" {
		d, _ = filepath.Abs("../.cache/nodesdks")
	}
	if _, err := os.Stat(filepath.Join(d, "node_modules", "@anthropic-ai", "sdk", "package.json")); err != nil {
		return ""
	}
	return d
}

// needNode returns node and the SDKs' directory; it skips the test when
// either is missing, or fails it in CI (CI=true) or with
// CORTEXBUILD_REQUIRE_NODESDKS set (.ci/run sets both).
func needNode(t *testing.T) (node, dir string) {
	t.Helper()
	node, err := exec.LookPath("node")
	dir = nodeSDKs()
	why := ""
	switch {
	case err != nil:
		why = "node is not installed: the Node SDK tests need Node.js 20 or later"
	case dir == "":
		why = "the pinned Node SDKs are not installed: run scripts/install-node-sdks.sh (into .cache/nodesdks), or set CORTEXBUILD_NODESDKS to where it installed them"
	}
	if why == "" {
		return node, dir
	}
	if testenv.InCI() || os.Getenv("CORTEXBUILD_REQUIRE_NODESDKS") != "" {
		t.Fatal(why)
	}
	t.Skip(why)
	return "", ""
}

// The TypeScript SDK's toolRunner, which uses message threads by default:
// refused, it sends every turn whole and finishes the loop.
func TestNodeToolRunnerThroughTheGateway(t *testing.T) {
	node, dir := needNode(t)
	w := newWorld(t, serveOn("claude"))
	toolRunnerTurns(w)
	cmd := exec.CommandContext(ctxT(t), node, filepath.Join("testdata", "node", "toolrunner.cjs"))
	cmd.Env = append(os.Environ(), "SDK_DIR="+dir, "GATEWAY_URL="+w.url, "GATEWAY_KEY="+w.key)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("toolRunner: %v\n%s", err, stderr.String())
	}
	var final struct {
		Content []struct{ Type, Text string }
	}
	if err := json.Unmarshal(stdout.Bytes(), &final); err != nil {
		t.Fatalf("toolRunner printed %q: %v", stdout.String(), err)
	}
	if len(final.Content) == 0 || final.Content[0].Text != "It is 18C and sunny in Paris." {
		t.Errorf("final message = %s", stdout.String())
	}
	checkToolRunnerTurns(t, w)
}
