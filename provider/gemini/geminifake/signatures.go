package geminifake

import (
	"encoding/base64"
	"fmt"
	"strings"
)

// issuedSig remembers where the fake sent a thought signature.
type issuedSig struct {
	callID, name string
}

// SkipSignatureValidator and ContextEngineeringSignature are the dummy
// thoughtSignature values the API documents as skipping validation (for
// histories built without real signatures). The fake accepts them as sent,
// or base64-encoded as the SDK sends []byte("…").
const (
	SkipSignatureValidator      = "skip_thought_signature_validator"
	ContextEngineeringSignature = "context_engineering_is_the_way_to_go"
)

// newSignature generates a signature shaped like the real ones: standard
// base64 of an opaque protobuf-like blob, so it starts with "E".
func (s *Server) newSignature() string {
	b := append([]byte{0x12, 64}, s.rnd.Bytes(64)...)
	return base64.StdEncoding.EncodeToString(b)
}

// remember records a signature the fake sent.
func (s *Server) remember(sig, callID, name string) {
	key, ok := decodeSignature(sig)
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.issued[key] = issuedSig{callID, name}
	if callID != "" {
		s.byCallID[callID] = key
	}
}

// decodeSignature decodes a bytes field the way proto JSON does (standard
// or URL-safe base64, padded or not).
func decodeSignature(sig string) (string, bool) {
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(sig); err == nil {
			return string(b), true
		}
	}
	return "", false
}

// signatureOK reports whether a thoughtSignature sent back on a function
// call is one the fake issued (compared as decoded bytes), and for that
// very call when the fake knows the call id, or a documented dummy value.
func (s *Server) signatureOK(sig string, fc *FunctionCall) bool {
	if sig == SkipSignatureValidator || sig == ContextEngineeringSignature {
		return true
	}
	key, ok := decodeSignature(sig)
	if !ok {
		return false
	}
	if key == SkipSignatureValidator || key == ContextEngineeringSignature {
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if want, known := s.byCallID[fc.ID]; fc.ID != "" && known {
		return key == want
	}
	_, ok = s.issued[key]
	return ok
}

// checkSignatures enforces the Gemini 3 rule: in the current turn (every
// content after the last user message that is not only function
// responses), the first functionCall part of each model content must carry
// a thoughtSignature, and every signature sent on a functionCall part must
// come back exactly as the fake issued it.
func (s *Server) checkSignatures(req GenerateRequest) *requestError {
	start := -1
	for i := len(req.Contents) - 1; i >= 0; i-- {
		c := req.Contents[i]
		if c.Role == "model" {
			continue
		}
		if !onlyFunctionResponses(c) {
			start = i
			break
		}
	}
	for i := start + 1; i < len(req.Contents); i++ {
		c := req.Contents[i]
		if c.Role != "model" {
			continue
		}
		first := true
		for _, p := range c.Parts {
			if p.FunctionCall == nil {
				continue
			}
			switch {
			case p.ThoughtSignature == "" && first:
				return &requestError{message: missingSignatureMessage(p.FunctionCall.Name, i+1)}
			case p.ThoughtSignature != "" && !s.signatureOK(p.ThoughtSignature, p.FunctionCall):
				return &requestError{message: MessageCorruptedSignature}
			}
			first = false
		}
	}
	return nil
}

func onlyFunctionResponses(c Content) bool {
	for _, p := range c.Parts {
		if p.FunctionResponse == nil {
			return false
		}
	}
	return len(c.Parts) > 0
}

// missingSignatureMessage is the real 400 message; position is the 1-based
// index of the offending content in contents.
func missingSignatureMessage(name string, position int) string {
	return fmt.Sprintf("Function call is missing a thought_signature in functionCall parts. "+
		"This is required for tools to work correctly, and missing thought_signature may lead to degraded model performance. "+
		"Additional data, function call `default_api:%s` , position %d. Please refer to %s for more details.",
		strings.TrimPrefix(name, "default_api:"), position, ThoughtSignaturesDocURL)
}

// signaturesRequired reports whether the check applies to model.
func (s *Server) signaturesRequired(model string) bool {
	switch s.cfg.sigMode {
	case sigAlways:
		return true
	case sigNever:
		return false
	}
	return requiresSignatures(model)
}
