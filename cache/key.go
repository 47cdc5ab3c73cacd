package cache

import (
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"hash"
	"math"
	"slices"
	"sync"

	"github.com/zeebo/blake3"

	"github.com/cortexbuild/cortexbuild/provider"
)

// KeyVersion is the version of the key format. Raise it whenever what goes
// into a key, or how, changes, so that old entries are never read with a new
// meaning.
const KeyVersion = 6

// ErrNoNamespace is returned by [NewKey] for a request without a cache_key:
// the caller did not ask for caching, so the request is sent as is.
var ErrNoNamespace = errors.New("cache: the request has no cache_key, so its response is not cached")

// Key identifies one cached response: the BLAKE3 hash (256 bits) of a
// normalised request and its [Scope]. BLAKE3, a cryptographic hash like
// SHA-256, hashes a 200 KB prompt at twice SHA-256's speed here (its
// chunks in parallel lanes). The zero Key is never a valid key.
type Key [32]byte

// String returns the key in lower-case hex.
func (k Key) String() string { return hex.EncodeToString(k[:]) }

// IsZero reports whether k is the zero Key.
func (k Key) IsZero() bool { return k == Key{} }

// Scope is what the key needs besides the request: where the response may be
// reused.
type Scope struct {
	// Project owns the entry; entries never cross projects. Required.
	Project string
	// Provider is the adapter instance that will serve the call (the name in
	// llm-config.yaml, as in provider.Result.Provider). Required.
	Provider string
	// Model is the model the instance resolved for the request (for example
	// with provider.TierMapper) when the caller knows it; empty otherwise.
	// With it, a change of the tier-to-model mapping starts new entries.
	Model string
}

// Cacheable reports whether req asks for response caching: it has a
// cache_key namespace.
func Cacheable(req *provider.Request) bool { return req != nil && req.CacheKey != "" }

// NewKey returns the key of req in scope. It returns [ErrNoNamespace] when
// req has no cache_key, and an error when the scope lacks its project or
// provider.
//
// The key covers every field of [provider.Request] that can change the
// answer; see the package documentation for the normalisation. Invalid JSON
// in tool arguments, schemas or metadata is hashed byte for byte (and kept
// apart from every valid value), so it never matches anything else.
func NewKey(scope Scope, req *provider.Request) (Key, error) {
	switch {
	case req == nil:
		return Key{}, errors.New("cache: no request")
	case req.CacheKey == "":
		return Key{}, ErrNoNamespace
	case scope.Project == "":
		return Key{}, errors.New("cache: the scope has no project; entries must never cross projects")
	case scope.Provider == "":
		return Key{}, errors.New("cache: the scope has no provider instance")
	}
	w := keyWriters.Get().(*keyWriter)
	w.b = w.b[:0]
	w.h.Reset()
	w.request(scope, req)
	w.h.Write(w.b)
	var k Key
	w.h.Sum(k[:0])
	if cap(w.b) <= maxPooledKeyBuffer {
		keyWriters.Put(w)
	}
	return k, nil
}

// maxPooledKeyBuffer bounds the buffers kept for reuse, so that one huge
// request does not pin its memory.
const maxPooledKeyBuffer = 1 << 20

var keyWriters = sync.Pool{New: func() any { return &keyWriter{h: blake3.New()} }}

// keyWriter serialises the key material unambiguously: strings and byte
// strings are length-prefixed, lists are count-prefixed, optional values
// carry a presence byte, and every section starts with a tag, so no two
// different inputs give the same bytes.
type keyWriter struct {
	// h hashes the key material: b, the material not yet hashed, and a
	// long byte string (a relayed body) written to it directly, not
	// copied into b first.
	h hash.Hash
	// copyAll copies every byte string into b (a test's reference).
	copyAll bool
	b       []byte
	canon   canonicalizer
	jbuf    []byte
	names   []string
}

// Section tags. They are part of the format: changing one needs a new
// KeyVersion.
const (
	tagHeader       = 'H'
	tagScope        = 'S'
	tagModel        = 'M'
	tagSystem       = 's'
	tagConversation = 'C'
	tagMessage      = 'm'
	tagPart         = 'p'
	tagToolCall     = 'c'
	tagToolResult   = 'r'
	tagTools        = 'T'
	tagTool         = 't'
	tagOptions      = 'O'
	tagMeta         = 'X'
	tagSampling     = 'P'
	tagImage        = 'i'
	tagNative       = 'N'
	tagAbsent       = 0
	jsonEmpty       = 0
	jsonCanonical   = 1
	jsonInvalid     = 2
)

func (w *keyWriter) request(scope Scope, req *provider.Request) {
	w.tag(tagHeader)
	w.str("cortexbuild response cache")
	w.uint(KeyVersion)

	w.tag(tagScope)
	w.str(scope.Project)
	w.str(req.CacheKey)
	w.str(scope.Provider)

	w.tag(tagModel)
	w.str(scope.Model)
	w.str(req.Model)
	w.str(string(req.EffectiveTier()))

	w.tag(tagSystem)
	w.str(req.System)

	// Messages then Prompt as the last user turn, without building the
	// appended slice that Request.Conversation would.
	w.tag(tagConversation)
	n := len(req.Messages)
	if req.Prompt != "" {
		n++
	}
	w.uint(uint64(n))
	for i := range req.Messages {
		w.message(&req.Messages[i])
	}
	if req.Prompt != "" {
		w.tag(tagMessage)
		w.str(string(provider.RoleUser))
		w.uint(1)
		w.part(&provider.Part{Type: provider.PartText, Text: req.Prompt})
	}

	w.tag(tagTools)
	w.uint(uint64(len(req.Tools)))
	for i := range req.Tools {
		t := &req.Tools[i]
		w.tag(tagTool)
		w.str(t.Name)
		w.str(t.Description)
		w.json(t.InputSchema)
		w.bool(t.Strict)
		w.str(string(t.Cache))
	}

	w.tag(tagOptions)
	choice := req.ToolChoice
	if choice == "" {
		choice = provider.ToolChoiceAuto
	}
	w.str(string(choice))
	w.uint(uint64(req.EffectiveMaxTokens()))
	w.str(string(req.PromptCache))
	w.bool(req.DisableParallelToolCalls)
	w.meta(req.Meta)

	w.tag(tagSampling)
	w.optFloat(req.Temperature)
	w.optFloat(req.TopP)
	w.bool(req.TopK != nil)
	if req.TopK != nil {
		w.uint(uint64(*req.TopK))
	}
	w.bool(req.Seed != nil)
	if req.Seed != nil {
		w.uint(uint64(*req.Seed))
	}
	w.uint(uint64(len(req.Stop)))
	for _, s := range req.Stop {
		w.str(s)
	}
	w.bool(req.ResponseFormat != nil)
	if f := req.ResponseFormat; f != nil {
		w.str(f.EffectiveName())
		w.str(f.Description)
		w.json(f.Schema)
		w.bool(f.Strict)
	}
	w.bool(req.Reasoning != nil)
	if r := req.Reasoning; r != nil {
		w.str(string(r.Effort))
		w.uint(uint64(r.Budget))
	}

	// A request relayed as sent: its body and the headers that go with it
	// hold what the decoded fields above may not (server tools, betas).
	w.tag(tagNative)
	w.bool(req.Native != nil)
	if n := req.Native; n != nil {
		w.str(string(n.Protocol))
		w.bytes(n.Body)
		names := w.names[:0]
		for k := range n.Header {
			names = append(names, k)
		}
		slices.Sort(names)
		w.uint(uint64(len(names)))
		for _, k := range names {
			w.str(k)
			w.uint(uint64(len(n.Header[k])))
			for _, v := range n.Header[k] {
				w.str(v)
			}
		}
		w.names = names[:0]
		w.str(n.Query.Encode())
	}
}

// optFloat writes presence, then the value's bits (-0 as 0).
func (w *keyWriter) optFloat(v *float64) {
	w.bool(v != nil)
	if v != nil {
		w.uint(math.Float64bits(*v + 0))
	}
}

func (w *keyWriter) message(m *provider.Message) {
	w.tag(tagMessage)
	w.str(string(m.Role))
	w.uint(uint64(len(m.Parts)))
	for i := range m.Parts {
		w.part(&m.Parts[i])
	}
}

func (w *keyWriter) part(p *provider.Part) {
	w.tag(tagPart)
	w.str(string(p.Type))
	w.str(p.Text)
	if c := p.ToolCall; c != nil {
		w.tag(tagToolCall)
		w.str(c.ID)
		w.str(c.Name)
		w.json(c.Arguments)
		w.meta(c.Meta)
	} else {
		w.tag(tagAbsent)
	}
	if r := p.ToolResult; r != nil {
		w.tag(tagToolResult)
		w.str(r.CallID)
		w.str(r.Name)
		w.str(r.Content)
		w.bool(r.IsError)
	} else {
		w.tag(tagAbsent)
	}
	if im := p.Image; im != nil {
		w.tag(tagImage)
		w.str(im.URL)
		w.bytes(im.Data)
		w.str(im.MediaType)
	} else {
		w.tag(tagAbsent)
	}
	w.meta(p.Meta)
	w.str(string(p.Cache))
}

// meta writes provider metadata with its keys in order; nil and empty are
// alike.
func (w *keyWriter) meta(m provider.Metadata) {
	w.tag(tagMeta)
	w.uint(uint64(len(m)))
	if len(m) == 0 {
		return
	}
	w.names = w.names[:0]
	for k := range m {
		w.names = append(w.names, k)
	}
	slices.Sort(w.names)
	for _, k := range w.names {
		w.str(k)
		w.json(m[k])
	}
}

// json writes a JSON value in canonical form, or byte for byte (tagged apart)
// when it is not valid JSON.
func (w *keyWriter) json(raw json.RawMessage) {
	if len(raw) == 0 {
		w.tag(jsonEmpty)
		return
	}
	c, err := w.canon.appendCanonical(w.jbuf[:0], raw)
	if err != nil {
		w.tag(jsonInvalid)
		w.bytes(raw)
		return
	}
	w.jbuf = c
	w.tag(jsonCanonical)
	w.bytes(c)
}

func (w *keyWriter) tag(t byte)    { w.b = append(w.b, t) }
func (w *keyWriter) uint(n uint64) { w.b = binary.AppendUvarint(w.b, n) }
func (w *keyWriter) str(s string)  { w.uint(uint64(len(s))); w.b = append(w.b, s...) }
func (w *keyWriter) bytes(b []byte) {
	w.uint(uint64(len(b)))
	if len(b) < directHash || w.copyAll {
		w.b = append(w.b, b...)
		return
	}
	w.h.Write(w.b)
	w.h.Write(b)
	w.b = w.b[:0]
}

// directHash is the length from which a byte string is hashed where it
// lies rather than copied into the key material's buffer.
const directHash = 4 << 10

func (w *keyWriter) bool(v bool) {
	if v {
		w.tag(1)
	} else {
		w.tag(0)
	}
}
