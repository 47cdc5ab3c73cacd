package gateway_test

import (
	"bytes"
	"log/slog"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/cortexbuild/cortexbuild/gateway"
)

// syncBuffer is a log sink safe for the server's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A key file made readable by others while the gateway runs is refused on
// the next request: the client gets a generic 500 in its protocol's shape
// that names neither the file nor the fix, the gateway's log has both.
func TestKeyFileMadeReadableWhileServingIsRefused(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("file modes do not describe access on Windows")
	}
	var log syncBuffer
	w := newWorld(t, withGateway(func(o *gateway.Options) { o.Logger = slog.New(slog.NewTextHandler(&log, nil)) }))
	auth := []string{"Authorization", "Bearer " + w.key, "Content-Type", "application/json"}
	if st, m := w.call(t, "POST", "/v1/chat/completions", "", chatBody, auth...); st != 200 {
		t.Fatalf("first call = %d %v", st, m)
	}
	if err := os.Chmod(w.keys.Path(), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ method, path, body string }{
		{"POST", "/v1/chat/completions", chatBody}, {"POST", "/v1/messages", messagesBody}, {"GET", "/v1/models", ""},
	} {
		st, m := w.call(t, c.method, c.path, "", c.body, auth...)
		raw := strings.ToLower(mustString(m))
		if st != 500 || strings.Contains(raw, "chmod") || strings.Contains(raw, strings.ToLower(w.keys.Path())) || !strings.Contains(raw, "key store") {
			t.Errorf("%s %s with a 0644 key file = %d %v, want a generic 500", c.method, c.path, st, m)
		}
	}
	if l := log.String(); !strings.Contains(l, "chmod 600 "+w.keys.Path()) || strings.Contains(l, w.key) {
		t.Errorf("the log does not say what to fix, or holds the key:\n%s", l)
	}
	if err := os.Chmod(w.keys.Path(), 0o600); err != nil {
		t.Fatal(err)
	}
	if st, m := w.call(t, "POST", "/v1/chat/completions", "", chatBody, auth...); st != 200 {
		t.Errorf("after chmod 600 = %d %v", st, m)
	}
}

func mustString(m map[string]any) string {
	var b strings.Builder
	for k, v := range m {
		b.WriteString(k)
		b.WriteString("=")
		if sub, ok := v.(map[string]any); ok {
			b.WriteString(mustString(sub))
		} else if s, ok := v.(string); ok {
			b.WriteString(s)
		}
		b.WriteString(" ")
	}
	return b.String()
}
