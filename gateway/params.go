package gateway

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/cortexbuild/cortexbuild/orchestrator"
	"github.com/cortexbuild/cortexbuild/provider"
)

// takeFloat decodes key, a number from 0 to max, into *dst.
func takeFloat(f *fields, key string, max float64, dst **float64) error {
	var v *float64
	if err := f.take(key, &v); err != nil {
		return err
	}
	if v != nil && !(*v >= 0 && *v <= max) {
		return badField(f.at(key), "must be between 0 and %g, got %g", max, *v)
	}
	*dst = v
	return nil
}

// takeTopK decodes top_k, an integer of at least 1.
func takeTopK(f *fields, dst **int) error {
	if err := f.take("top_k", dst); err != nil {
		return err
	}
	if *dst != nil && **dst < 1 {
		return badField(f.at("top_k"), "must be at least 1, got %d", **dst)
	}
	return nil
}

// takeStop decodes Chat's stop: a string or an array of strings.
func takeStop(f *fields, key string, dst *[]string) error {
	raw := f.raw(key)
	if raw == nil {
		return nil
	}
	var one string
	if json.Unmarshal(raw, &one) == nil {
		*dst = []string{one}
		return nil
	}
	if err := decodeInto(f.at(key), raw, dst); err != nil {
		return badField(f.at(key), "want a string or an array of strings, got %s", jsonKind(raw))
	}
	return nil
}

// effortOf reads a reasoning effort given at path in the OpenAI protocols'
// or the Messages API's words: "none" sends no reasoning setting (nil);
// "minimal" is taken as low, and "xhigh" and "max" as high, the nearest
// efforts every reasoning provider has.
func effortOf(path, effort string) (*provider.Reasoning, error) {
	switch effort {
	case "none":
		return nil, nil
	case "minimal", "low":
		return &provider.Reasoning{Effort: provider.EffortLow}, nil
	case "medium":
		return &provider.Reasoning{Effort: provider.EffortMedium}, nil
	case "high", "xhigh", "max":
		return &provider.Reasoning{Effort: provider.EffortHigh}, nil
	}
	return nil, badField(path, "%q is not a reasoning effort: send none, minimal, low, medium, high or xhigh", effort)
}

// capabler is what the gateway needs to tell which sampling settings the
// model that served a call dropped; *orchestrator.Orchestrator implements
// it.
type capabler interface {
	ModelCapabilities(providerName, model string) (provider.CapabilitySet, bool)
}

// unhonoured adds to HeaderIgnored the sampling settings of req that the
// model that served it does not honour (for example temperature on an
// OpenAI reasoning model, seed on Anthropic).
func (g *Gateway) unhonoured(h http.Header, req *provider.Request, prov, model string) (dropped []string) {
	c, ok := g.opts.Orchestrator.(capabler)
	if !ok {
		return nil
	}
	caps, ok := c.ModelCapabilities(prov, model)
	if !ok {
		return nil
	}
	dropped = req.Unhonoured(caps)
	if len(dropped) == 0 {
		return nil
	}
	names := dropped
	if prev := h.Get(HeaderIgnored); prev != "" {
		names = append(strings.Split(prev, ", "), names...)
	}
	h.Set(HeaderIgnored, ignoredHeader(names))
	return dropped
}

// strictSampling applies gateway.strict_params to sampling settings: the
// call may go only to models that honour every one it carries, and is
// refused when none can.
func (g *Gateway) strictSampling(ctx context.Context, c *orchestrator.Call) *failure {
	need := c.Request.SamplingCapabilities()
	if !g.opts.StrictParams || need == 0 {
		return nil
	}
	c.Needs = c.Needs.Union(need)
	if tr := g.opts.Orchestrator.Route(ctx, *c); len(tr.Kept()) > 0 {
		return nil
	}
	names := c.Request.Unhonoured(0)
	return &failure{class: classBadRequest, param: names[0],
		msg: fmt.Sprintf("%s: no model this call can go to honours them (it needs %s), and gateway.strict_params refuses what it cannot apply", strings.Join(names, ", "), need)}
}

// jsonSchemaFormat decodes the fields of a json_schema response format
// (Chat's response_format.json_schema, Responses' text.format, Messages'
// output_config.format): name, description, schema, strict.
func jsonSchemaFormat(ff *fields) (*provider.ResponseFormat, error) {
	rf := &provider.ResponseFormat{}
	if err := ff.take("name", &rf.Name); err != nil {
		return nil, err
	}
	if err := ff.take("description", &rf.Description); err != nil {
		return nil, err
	}
	if err := ff.take("strict", &rf.Strict); err != nil {
		return nil, err
	}
	raw := ff.raw("schema")
	if raw == nil {
		return nil, badField(ff.at("schema"), "required: the JSON Schema the answer must match")
	}
	if _, err := object(ff.at("schema"), raw); err != nil {
		return nil, err
	}
	rf.Schema = keep(raw)
	return rf, nil
}

// formatOfType decodes a response format object whose type is "text"
// (nil) or "json_schema"; the JSON schema's fields are in the object
// itself, or under nested when it is not "".
func formatOfType(path string, raw json.RawMessage, nested string) (*provider.ResponseFormat, error) {
	ff, err := object(path, raw)
	if err != nil {
		return nil, err
	}
	var typ string
	if err := ff.take("type", &typ); err != nil {
		return nil, err
	}
	switch typ {
	case "", "text":
		return nil, nil
	case "json_schema":
	case "json_object":
		return nil, badField(ff.at("type"), "json_object is not supported by the gateway: send json_schema with the schema the answer must match")
	default:
		return nil, badField(ff.at("type"), "%q is not supported by the gateway: send text or json_schema", typ)
	}
	if nested == "" {
		return jsonSchemaFormat(ff)
	}
	nraw := ff.raw(nested)
	if nraw == nil {
		return nil, badField(ff.at(nested), "required with type json_schema")
	}
	nf, err := object(ff.at(nested), nraw)
	if err != nil {
		return nil, err
	}
	return jsonSchemaFormat(nf)
}

// imagePart reads an image given as a URL: an http or https URL the
// provider fetches, or a base64 data URL whose bytes are sent inline.
func imagePart(path, url string) (provider.Part, error) {
	im := &provider.Image{URL: url}
	if rest, ok := strings.CutPrefix(url, "data:"); ok {
		mime, data, ok := strings.Cut(rest, ";base64,")
		if !ok {
			return provider.Part{}, badField(path, "a data URL must be base64: data:<media type>;base64,<data>")
		}
		b, err := base64.StdEncoding.DecodeString(data)
		if err != nil {
			return provider.Part{}, badField(path, "the data URL's base64 does not decode: %v", err)
		}
		im = &provider.Image{Data: b, MediaType: mime}
	}
	return imageOf(path, im)
}

// imageOf checks an image the way providers will.
func imageOf(path string, im *provider.Image) (provider.Part, error) {
	switch {
	case im.URL == "" && len(im.Data) == 0:
		return provider.Part{}, badField(path, "the image is empty")
	case im.URL != "" && !strings.HasPrefix(im.URL, "https://") && !strings.HasPrefix(im.URL, "http://"):
		return provider.Part{}, badField(path, "want an http or https URL, or a base64 data URL")
	case len(im.Data) > 0 && !slices.Contains(provider.ImageMediaTypes, im.MediaType):
		return provider.Part{}, badField(path, "media type %q is not one every provider takes: send %s", im.MediaType, strings.Join(provider.ImageMediaTypes, ", "))
	}
	return provider.Part{Type: provider.PartImage, Image: im}, nil
}

// textOnly refuses images in content that can only be text (system
// prompts, assistant turns, tool results).
func textOnly(path string, parts []provider.Part) error {
	for _, p := range parts {
		if p.Type == provider.PartImage {
			return badField(path, "images are only taken in user messages")
		}
	}
	return nil
}
