package console

// registerSilences adds the Silences page's routes (issue 27: not built yet).
func (c *Console) registerSilences() {}
