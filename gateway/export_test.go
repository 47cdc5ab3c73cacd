package gateway

// FullDecodes returns how many request bodies g has decoded in full.
func (g *Gateway) FullDecodes() int64 { return g.decodes.Load() }
