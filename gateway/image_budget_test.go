package gateway_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/cortexbuild/cortexbuild/gateway"
	"github.com/cortexbuild/cortexbuild/ledger"
	"github.com/cortexbuild/cortexbuild/provider"
	"github.com/cortexbuild/cortexbuild/provider/providertest"
)

// The attack's image: a 300 KB base64 PNG sent on a task of $0.02 was
// billed as its base64's text (about 105,000 tokens, $0.31 on Claude
// Sonnet) after a reservation of a flat 2,500 tokens. Billed by its
// 280×280 pixels and reserved by the same formula, the task ends within
// its $0.02 however many such calls are sent.
func TestLargeImageNeverOverspendsATask(t *testing.T) {
	w := newWorld(t, withLedger, serveOn("claude"))
	ctx := context.Background()
	key, _, err := w.keys.Create(gateway.KeySpec{Name: "img", Project: "demo", Task: "img"})
	if err != nil {
		t.Fatal(err)
	}
	task := ledger.TaskScope("img")
	limit := provider.MustMoney("0.02")
	if err := w.store.SetBudget(ctx, task, limit); err != nil {
		t.Fatal(err)
	}
	img := base64.StdEncoding.EncodeToString(providertest.NoisePNG(280, 280))
	body, _ := json.Marshal(map[string]any{"model": "claude-sonnet-4-6", "max_tokens": 100,
		"messages": []map[string]any{{"role": "user", "content": []map[string]any{
			{"type": "image", "source": map[string]any{"type": "base64", "media_type": "image/png", "data": img}},
			{"type": "text", "text": "What is in this image?"},
		}}}})
	served := 0
	for range 8 {
		req, _ := http.NewRequestWithContext(ctx, "POST", w.url+"/v1/messages", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := w.http().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		switch resp.StatusCode {
		case 200:
			served++
		case http.StatusPaymentRequired:
		default:
			t.Fatalf("status %d", resp.StatusCode)
		}
	}
	b, err := w.store.Budget(ctx, task)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d calls of a %d KB base64 image served, task spent $%s of $%s", served, len(img)>>10, b.Spent, limit)
	if served == 0 || b.Spent > limit || b.Held != 0 {
		t.Errorf("%d calls served; task spent $%s (held $%s) of $%s", served, b.Spent, b.Held, limit)
	}
}
