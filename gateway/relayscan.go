package gateway

import (
	"fmt"
	"net/http"
	"slices"

	"github.com/tidwall/gjson"

	"github.com/cortexbuild/cortexbuild/orchestrator"
	"github.com/cortexbuild/cortexbuild/provider"
)

// members are the members of a JSON object, in order, each key once.
type members []member

type member struct {
	key string
	val gjson.Result
}

// get returns the value of key, or the zero Result (not Exists) when the
// object has none.
func (m members) get(key string) gjson.Result {
	for i := range m {
		if m[i].key == key {
			return m[i].val
		}
	}
	return gjson.Result{}
}

// linearKeys is the number of keys up to which objectMembers looks for a
// repeated key by comparing with the keys before it; past it a map does,
// so that a hostile object of many keys costs linear time.
const linearKeys = 32

// objectMembers splits obj, a JSON object, into its members (keys
// unescaped, as a JSON parser reads them) and returns the first key it
// names twice, "" when none.
func objectMembers(obj gjson.Result) (m members, repeated string) {
	var seen map[string]struct{}
	obj.ForEach(func(k, v gjson.Result) bool {
		key := k.Str
		switch {
		case seen != nil:
		case len(m) < linearKeys:
			for i := range m {
				if m[i].key == key {
					repeated = key
					return false
				}
			}
			m = append(m, member{key, v})
			return true
		default:
			seen = make(map[string]struct{}, 2*len(m))
			for i := range m {
				seen[m[i].key] = struct{}{}
			}
		}
		if _, dup := seen[key]; dup {
			repeated = key
			return false
		}
		seen[key] = struct{}{}
		m = append(m, member{key, v})
		return true
	})
	return m, repeated
}

// relayBody is a request body in a provider's protocol, read once at
// its top level: the members the gateway routes, prices and edits a
// relayed request by.
type relayBody struct {
	raw []byte
	top members
	// system holds, for Chat, the contents of the system and developer
	// messages, in order.
	system []gjson.Result
	// rich is set when the body holds content the gateway prices by
	// decoding it ([richContent]).
	rich bool
	// cache is the longest prompt-cache lifetime a Messages body may ask
	// for: none without a "cache_control" key, the hour when a string
	// spells "1h", five minutes otherwise. The other protocols' caching
	// is the provider's own, priced with every relayed request.
	cache provider.PromptCache
}

// scanRelayBody reads body, a request in protocol p, at its top level, in
// one pass over its bytes ([scanJSON]). ok is false when body is not a
// valid JSON object (the full decoder then says what is wrong). A key
// named twice, at the top level or in an object whose members the
// gateway reads to price or route a relayed request (a tool, the tool
// choice), is refused: the gateway reads the first, a provider may read
// the last, and the request would be priced as one thing and run as
// another.
func scanRelayBody(p provider.Protocol, body []byte) (rb relayBody, ok bool, f *failure) {
	words := scanWords[p]
	roles := ""
	if p == provider.ProtoChat {
		roles = "messages"
	}
	s, ok := scanJSON(body, words, roles)
	if !ok {
		return relayBody{}, false, nil
	}
	top, dup := uniqueMembers(s.top)
	if dup != "" {
		return relayBody{}, false, repeatedKey(dup)
	}
	rb = relayBody{raw: body, top: top, system: s.system, cache: provider.PromptCacheOff}
	for k := range words {
		switch {
		case !s.has(k):
		case k < len(richContent[p]):
			rb.rich = true
		case p == provider.ProtoMessages && words[k] == "cache_control" && rb.cache == provider.PromptCacheOff:
			rb.cache = provider.PromptCache5m
		}
	}
	if rb.cache != provider.PromptCacheOff && s.has(len(words)-1) {
		rb.cache = provider.PromptCache1h
	}
	for i, t := range rb.top.get("tools").Array() {
		if !t.IsObject() {
			continue
		}
		if _, dup := objectMembers(t); dup != "" {
			return relayBody{}, false, repeatedKey(fmt.Sprintf("tools[%d].%s", i, dup))
		}
	}
	if tc := rb.top.get("tool_choice"); tc.IsObject() {
		if _, dup := objectMembers(tc); dup != "" {
			return relayBody{}, false, repeatedKey("tool_choice." + dup)
		}
	}
	return rb, true, nil
}

// uniqueMembers returns m and the first key it names twice, "" when none
// (m then holds the members up to it).
func uniqueMembers(m members) (members, string) {
	if len(m) <= linearKeys {
		for i := range m {
			for j := range i {
				if m[j].key == m[i].key {
					return m[:i], m[i].key
				}
			}
		}
		return m, ""
	}
	seen := make(map[string]struct{}, len(m))
	for i := range m {
		if _, dup := seen[m[i].key]; dup {
			return m[:i], m[i].key
		}
		seen[m[i].key] = struct{}{}
	}
	return m, ""
}

func repeatedKey(path string) *failure {
	return &failure{class: classBadRequest, param: path, msg: path + ": the request body names this key twice; name it once (JSON parsers differ on which value they read: the gateway could price one and the provider run the other)"}
}

// richContent lists, by protocol, the strings that mark content the
// gateway prices by decoding it (images, documents, audio, files): a body
// holding one, as a key or a value, escaped or not, is decoded in full
// even on a relayed route, so that its estimate bounds an image by its
// size rather than by its bytes, and the route keeps only models that
// read it. A marker quoted inside a longer string (source code quoting
// it) is not a string of its own and does not match.
var richContent = map[provider.Protocol][]string{
	provider.ProtoMessages:  {"image", "document"},
	provider.ProtoChat:      {"image_url", "input_audio", "file"},
	provider.ProtoResponses: {"input_image", "input_file", "input_audio"},
}

// scanWords are, by protocol, the strings scanRelayBody looks for: the
// rich content markers, then "cache_control" and "1h" (the one-hour
// prompt cache lifetime), last.
var scanWords = func() map[provider.Protocol][]string {
	m := map[provider.Protocol][]string{}
	for _, p := range []provider.Protocol{provider.ProtoMessages, provider.ProtoChat, provider.ProtoResponses, provider.ProtoCountTokens} {
		m[p] = append(slices.Clip(richContent[p]), "cache_control", "1h")
	}
	return m
}()

// relayOnly decodes a request from its top level alone ([minimalDecode])
// when every candidate its route keeps relays it as sent: the content
// goes to the provider untouched, so the gateway need not decode it, and
// its whole body counts as unmodeled prompt bytes (each at most a token)
// in the estimate. ok is false when a candidate would translate it, or
// when something needs the full decoder (a thread, which is refused; a
// body minimalDecode refuses, for the full decoder's words; rich content,
// see [richContent]; gateway.strict_params); the caller then decodes it
// in full.
func (g *Gateway) relayOnly(r *http.Request, key *Key, proto provider.Protocol, rb relayBody) (*decoded, orchestrator.Call, bool) {
	// gateway.strict_params judges the decoded sampling and reasoning
	// settings against each model: it needs the full decoder.
	if g.opts.StrictParams || proto == provider.ProtoCountTokens || rb.top.get("thread").Exists() || rb.rich {
		return nil, orchestrator.Call{}, false
	}
	d, err := minimalDecode(proto, rb)
	if err != nil {
		return nil, orchestrator.Call{}, false
	}
	d.req.Native = nativeOf(r, proto, rb, d.stream, int64(len(rb.raw)))
	d.req.Native.Scanned = true
	d.req.PromptCache = rb.cache
	call, f := g.callFor(r, key, d.model, d.req)
	if f != nil {
		return nil, orchestrator.Call{}, false
	}
	call.Needs = call.Needs.Union(relayNeeds(proto, rb))
	tr := g.opts.Orchestrator.Route(r.Context(), call)
	kept := tr.Kept()
	if len(kept) == 0 {
		return nil, orchestrator.Call{}, false
	}
	for _, k := range kept {
		if !k.Native {
			return nil, orchestrator.Call{}, false
		}
	}
	// Only a relay may serve it: the decoded request holds no content.
	if d.req.Native.Required == "" {
		d.req.Native.Required = "the gateway read only its top level, every route relaying it as sent"
	}
	return d, call, true
}

// relayNeeds returns the capabilities a relayed body asks of a model
// that the full decoder would have found ([provider.Request.RequiredCapabilities]):
// tools, a JSON Schema for the answer (prompt caching comes with
// relayBody.cache).
func relayNeeds(p provider.Protocol, rb relayBody) provider.CapabilitySet {
	var s provider.CapabilitySet
	if t := rb.top.get("tools"); t.IsArray() && len(t.Array()) > 0 {
		s = s.With(provider.CapToolUse)
	}
	var format bool
	switch p {
	case provider.ProtoMessages:
		format = rb.top.get("output_format").IsObject() || rb.top.get("output_config").Get("format").IsObject()
	case provider.ProtoChat:
		format = rb.top.get("response_format").Get("type").String() == "json_schema"
	case provider.ProtoResponses:
		format = rb.top.get("text").Get("format.type").String() == "json_schema"
	}
	if format {
		s = s.With(provider.CapStructuredOutput)
	}
	return s
}
