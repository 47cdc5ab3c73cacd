package gateway_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/cortexbuild/cortexbuild/gateway"
	"github.com/cortexbuild/cortexbuild/ledger"
	"github.com/cortexbuild/cortexbuild/pricing"
	"github.com/cortexbuild/cortexbuild/provider"
	"github.com/cortexbuild/cortexbuild/provider/anthropic/anthropicfake"
	"github.com/cortexbuild/cortexbuild/provider/openaicompat/openaifake"
)

// TestPassthroughConformance replays the corpus of real requests (the
// pinned hosts' and the official SDKs', testdata/native) through `serve`
// to the fake of the provider that speaks their protocol, each answered
// with the answer captured with it. For every exchange: the provider gets
// the client's body (as JSON values: the model, the router's to choose,
// aside) and the provider's API headers as sent, never the client's
// credentials; the client gets the provider's status and bytes, every
// stream event included; the ledger row holds the usage the answer
// reports, priced exactly.
func TestPassthroughConformance(t *testing.T) {
	cat, err := pricing.Default()
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range loadCorpus(t) {
		t.Run(strings.TrimSuffix(e.File, ".json"), func(t *testing.T) {
			vendor, ns := "claude", "anthropic"
			if e.Protocol != provider.ProtoMessages && e.Protocol != provider.ProtoCountTokens {
				vendor, ns = "gpt", "openai"
			}
			var fields []string
			gjson.ParseBytes(e.Request.Body).ForEach(func(k, _ gjson.Result) bool {
				fields = append(fields, k.String())
				return true
			})
			w := newWorld(t, withLedger, only(vendor), func(s *setup) {
				// The corpus is what the real API accepts.
				s.anthOpts = append(s.anthOpts, anthropicfake.WithAcceptedFields(fields...))
				s.oaiOpts = append(s.oaiOpts, openaifake.WithAcceptedFields(fields...))
			})
			ct := e.Response.Header.Get("Content-Type")
			headers := map[string]string{}
			for _, k := range []string{"Request-Id", "X-Request-Id"} {
				if v := e.Response.Header.Get(k); v != "" {
					headers[k] = v
				}
			}
			if vendor == "claude" {
				r := anthropicfake.Reply{Status: e.Response.Status, RawBody: string(e.Response.Body), RawContentType: ct, Headers: headers}
				if e.Protocol == provider.ProtoCountTokens {
					w.anth.EnqueueRoute(anthropicfake.RouteCountTokens, r)
				} else {
					w.anth.Enqueue(r)
				}
			} else {
				r := openaifake.Reply{Status: e.Response.Status, RawBody: string(e.Response.Body), RawContentType: ct, Headers: headers}
				if e.Protocol == provider.ProtoResponses {
					w.oai.EnqueueResponses(r)
				} else {
					w.oai.Enqueue(r)
				}
			}

			req, err := http.NewRequestWithContext(ctxT(t), e.Request.Method, w.url+e.Request.Path, bytes.NewReader(e.Request.Body))
			if err != nil {
				t.Fatal(err)
			}
			for k, vs := range e.Request.Header {
				switch http.CanonicalHeaderKey(k) {
				case "Authorization", "X-Api-Key", "Content-Length", "Host", "Accept-Encoding", "Connection":
					continue
				}
				req.Header[k] = vs
			}
			req.Header.Set("Authorization", "Bearer "+w.key)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != e.Response.Status || !bytes.Equal(got, e.Response.Body) {
				t.Fatalf("the client got %d %d bytes, not the provider's %d %d bytes:\n%.600s", resp.StatusCode, len(got), e.Response.Status, len(e.Response.Body), got)
			}
			if h := resp.Header.Get(gateway.HeaderIgnored); h != "" {
				t.Errorf("%s %q on a relayed answer", gateway.HeaderIgnored, h)
			}

			var up []byte
			var upHeader http.Header
			if vendor == "claude" {
				r := w.anth.Requests()
				up, upHeader = r[len(r)-1].Body, r[len(r)-1].Header
			} else {
				r := w.oai.Requests()
				up, upHeader = r[len(r)-1].Body, r[len(r)-1].Header
			}
			except := []string{"model"}
			if adj := resp.Header.Get(gateway.HeaderAdjusted); adj != "" {
				for _, a := range strings.Split(adj, ", ") {
					name, _, _ := strings.Cut(a, "=")
					except = append(except, name)
				}
			}
			sameJSONExcept(t, up, e.Request.Body, except...)
			for k, vs := range e.Request.Header {
				ck := http.CanonicalHeaderKey(k)
				if strings.HasPrefix(ck, "Anthropic-") || ck == "Openai-Beta" {
					if strings.Join(upHeader.Values(ck), "\x00") != strings.Join(vs, "\x00") {
						t.Errorf("%s upstream %q; the client sent %q", ck, upHeader.Values(ck), vs)
					}
				}
			}
			if strings.Contains(asJSON(upHeader), w.key) {
				t.Error("the virtual key went upstream")
			}

			rows, err := w.store.Attempts(ctxT(t), ledger.Filter{})
			if e.Protocol == provider.ProtoCountTokens {
				// Free: counted by the provider, recorded nowhere.
				if err != nil || len(rows) != 0 {
					t.Errorf("ledger rows %d, %v for a count; want none", len(rows), err)
				}
				return
			}
			if err != nil || len(rows) != 1 {
				t.Fatalf("ledger rows %d, %v; want 1", len(rows), err)
			}
			u, model := reportedUsage(t, e.Protocol, e.Response.Body, e.Response.Stream)
			if _, err := cat.Cost(ns, model, provider.Usage{}, time.Now()); err != nil {
				model = rows[0].Model // priced at the model asked for
			}
			want, err := cat.Cost(ns, model, u, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			row := rows[0]
			if row.InputTokens != u.InputTokens || row.OutputTokens != u.OutputTokens || row.CacheReadTokens != u.CacheReadTokens ||
				row.CacheWriteTokens != u.CacheWriteTokens || row.EstimatedUsage || row.Cost != want {
				t.Errorf("ledger row %+v; want the reported usage %+v at %s", row, u, want)
			}
		})
	}
}

// reportedUsage reads the usage an answer in protocol p reports, and the
// model it names, independently of the adapters.
func reportedUsage(t *testing.T, p provider.Protocol, body []byte, stream bool) (provider.Usage, string) {
	t.Helper()
	var docs []gjson.Result
	if stream {
		for _, line := range strings.Split(string(body), "\n") {
			if d, ok := strings.CutPrefix(line, "data:"); ok && json.Valid([]byte(strings.TrimSpace(d))) {
				docs = append(docs, gjson.Parse(strings.TrimSpace(d)))
			}
		}
	} else {
		docs = []gjson.Result{gjson.ParseBytes(body)}
	}
	var u provider.Usage
	model := ""
	switch p {
	case provider.ProtoMessages:
		var in, read, write, long, out, searches int64
		tier := ""
		take := func(us gjson.Result) {
			if !us.Exists() {
				return
			}
			if v := us.Get("input_tokens"); v.Exists() && (v.Int() > 0 || in == 0) {
				in = v.Int()
			}
			if v := us.Get("cache_read_input_tokens"); v.Exists() && v.Int() > 0 {
				read = v.Int()
			}
			if v := us.Get("cache_creation_input_tokens"); v.Exists() && v.Int() > 0 {
				write = v.Int()
			}
			if v := us.Get("cache_creation.ephemeral_1h_input_tokens"); v.Int() > 0 {
				long = v.Int()
			}
			if v := us.Get("output_tokens"); v.Exists() {
				out = v.Int()
			}
			if v := us.Get("server_tool_use.web_search_requests"); v.Exists() {
				searches = v.Int()
			}
			if v := us.Get("service_tier"); v.Exists() {
				tier = v.String()
			}
		}
		for _, d := range docs {
			switch d.Get("type").String() {
			case "message":
				model = d.Get("model").String()
				take(d.Get("usage"))
			case "message_start":
				model = d.Get("message.model").String()
				take(d.Get("message.usage"))
			case "message_delta":
				take(d.Get("usage"))
			}
		}
		u = provider.UsageExclusive(in, read, write, out)
		u.CacheWriteLongTokens, u.WebSearchRequests = long, searches
		if tier != "standard" {
			u.ServiceTier = tier
		}
	case provider.ProtoChat:
		for _, d := range docs {
			if m := d.Get("model"); m.Exists() {
				model = m.String()
			}
			if us := d.Get("usage"); us.IsObject() {
				u = provider.UsageInclusive(us.Get("prompt_tokens").Int(), us.Get("prompt_tokens_details.cached_tokens").Int(), 0, us.Get("completion_tokens").Int())
				u.ReasoningTokens = us.Get("completion_tokens_details.reasoning_tokens").Int()
			}
			if st := d.Get("service_tier"); st.Exists() && st.String() != "default" {
				u.ServiceTier = st.String()
			}
		}
	case provider.ProtoResponses:
		for _, d := range docs {
			r := d
			if d.Get("response").IsObject() {
				r = d.Get("response")
			}
			if r.Get("object").String() != "response" || r.Get("status").String() == "in_progress" {
				continue
			}
			model = r.Get("model").String()
			us := r.Get("usage")
			u = provider.UsageInclusive(us.Get("input_tokens").Int(), us.Get("input_tokens_details.cached_tokens").Int(), 0, us.Get("output_tokens").Int())
			u.ReasoningTokens = us.Get("output_tokens_details.reasoning_tokens").Int()
			u.WebSearchRequests = 0
			for _, it := range r.Get("output").Array() {
				if it.Get("type").String() == "web_search_call" {
					u.WebSearchRequests++
				}
			}
			if st := r.Get("service_tier"); st.Exists() && st.String() != "default" {
				u.ServiceTier = st.String()
			}
		}
	}
	return u, model
}
