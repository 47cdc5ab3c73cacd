package openaicompat

import (
	"github.com/cortexbuild/cortexbuild/pricing"
	"github.com/cortexbuild/cortexbuild/provider"
)

// estimateUsage counts a call offline when the server reported no usage (a
// stream without include_usage, or one cut before its usage chunk). The
// result is marked Estimated.
func estimateUsage(req *provider.Request, res *provider.Result) provider.Usage {
	out := pricing.CountTokens(res.Content)
	for _, tc := range res.ToolCalls {
		out += pricing.CountTokens(tc.Name) + pricing.CountTokens(string(tc.Arguments)) + pricing.MessageOverhead
	}
	return provider.Usage{InputTokens: pricing.CountRequestTokens(req), OutputTokens: out, Estimated: true}
}
