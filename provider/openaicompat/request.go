package openaicompat

import (
	"context"
	"fmt"
	"net/http"

	"github.com/openai/openai-go/v3/option"

	"github.com/cortexbuild/cortexbuild/provider"
)

// MetaReasoning carries a server's non-standard reasoning text (Ollama's
// message.reasoning) on a reasoning part; it is not sent back.
const MetaReasoning = "openai.reasoning"

// attempt is one call's encoded body and bounded context.
type attempt struct {
	model  string
	body   []byte
	ctx    context.Context
	cancel context.CancelFunc
	raw    *http.Response
	opts   []option.RequestOption
}

// begin validates and maps req and bounds the attempt by its timeout.
func (a *Adapter) begin(ctx context.Context, req *provider.Request, stream bool) (*attempt, error) {
	at := &attempt{model: a.base.Model(req)}
	if at.model == "" {
		return nil, a.base.BadRequest("", fmt.Sprintf("no model for tier %s: set providers.%s.models.%s in llm-config.yaml", req.EffectiveTier(), a.base.Name, req.EffectiveTier()))
	}
	if err := a.base.Validate(req, at.model); err != nil {
		return nil, err
	}
	var err error
	if at.body, err = a.body(req, at.model, stream); err != nil {
		return nil, err
	}
	at.ctx, at.cancel = a.base.Attempt(ctx, req)
	at.opts = []option.RequestOption{option.WithRequestTimeout(a.base.AttemptTimeout(req)), option.WithResponseInto(&at.raw)}
	return at, nil
}

// chatPath is Chat Completions' endpoint, relative to the base URL.
const chatPath = "chat/completions"
