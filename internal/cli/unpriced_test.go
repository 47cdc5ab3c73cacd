package cli

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/cortexbuild/cortexbuild/provider"
	"github.com/cortexbuild/cortexbuild/provider/anthropic/anthropicfake"
	"github.com/cortexbuild/cortexbuild/provider/openaicompat/openaifake"
)

// A call answered by a model the catalog does not list, requested as a
// model it does not list either (a failover to a private deployment), is
// charged its reservation and reported: a warning at the time of the call,
// 'spend' (text and JSON) and 'doctor' naming the provider/model and the fix.
func TestUnpricedCallsAreReported(t *testing.T) {
	anth := anthropicfake.New(anthropicfake.WithAPIKey(testKey))
	oai := openaifake.New(openaifake.WithAPIKey(testKey))
	t.Cleanup(func() { anth.Close(); oai.Close() })
	dir := writeConfig(t, fmt.Sprintf(`orchestration: true
providers:
  claude:
    type: anthropic
    base_url: %s
    credentials: {api_key: "${MY_KEY}"}
  private:
    type: openai_compatible
    profile: openai
    base_url: %s/v1
    credentials: {api_key: "${MY_KEY}"}
    models: {balanced: acme-private-1}
routing:
  preference: [claude, private]
  allow_alternates: true
`, anth.URL(), oai.URL()))
	anth.Enqueue(anthropicfake.BillingError())
	oai.Enqueue(openaifake.Reply{Text: "from the deployment", Usage: openaifake.Usage{Prompt: 50, Completion: 10}})
	code, out, errs := run(t, dir, keyEnv, "invoke", "--json", "--task", "t1", "--agent", "builder", "hi")
	var res struct {
		Estimate provider.Money `json:"estimate_usd"`
		Cost     provider.Money `json:"cost_usd"`
		Unpriced bool           `json:"unpriced"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil || !res.Unpriced || res.Cost != res.Estimate || res.Cost <= 0 {
		t.Fatalf("invoke = %d %s\n%s", code, out, errs)
	}
	if !strings.Contains(errs, "unpriced_call") || !strings.Contains(errs, "acme-private-1") || !strings.Contains(errs, "pricing.catalog_files") {
		t.Errorf("no warning at the time of the call:\n%s", errs)
	}

	code, out, _ = run(t, dir, nil, "spend", "--json")
	var rep struct {
		Total struct {
			Cost     provider.Money `json:"cost_usd"`
			Unpriced int            `json:"unpriced"`
		} `json:"total"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &rep) != nil || rep.Total.Unpriced != 1 || rep.Total.Cost != res.Cost {
		t.Errorf("spend --json = %d %s", code, out)
	}
	if code, out, _ := run(t, dir, nil, "spend"); code != 0 || !strings.Contains(out, "unpriced: 1 attempt(s) charged their reservation") || !strings.Contains(out, "private/acme-private-1 (1)") {
		t.Errorf("spend = %d\n%s", code, out)
	}
	_, drep, _ := runDoctor(t, nil, dir, keyEnv)
	c := checkNamed(t, drep, "prices")
	if c.Status != checkWarn || !strings.Contains(c.Detail, "private/acme-private-1 (1)") || !strings.Contains(c.Fix, "pricing.catalog_files") {
		t.Errorf("doctor prices check = %+v", c)
	}
}
